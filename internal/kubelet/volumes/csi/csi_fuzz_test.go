package csi

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const fuzzRoot = "/var/lib/kubelet"

// checkStagingDir fails t unless the staging directory of driver and handle
// is a directory two levels below the CSI plugin's own (driver, then the
// handle's hash).
func checkStagingDir(t *testing.T, r *Registry, driver, handle string) {
	t.Helper()
	base := filepath.Join(fuzzRoot, "plugins", PluginName)
	dir := r.stagingDir(driver, handle)
	if rel, err := filepath.Rel(base, dir); err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, "/") != 1 || filepath.Dir(filepath.Dir(dir)) != base {
		t.Fatalf("driver %q handle %q: staging dir %s is not two levels below %s", driver, handle, dir, base)
	}
}

// FuzzVolData: any vol_data.json decodes or is an error with no data, never
// a panic; what decodes names a staging directory inside the plugin's
// directory, and reads back the same once written (as writeVolData does).
func FuzzVolData(f *testing.F) {
	for _, seed := range []string{
		`{"specVolID":"pvc-1","volumeHandle":"vol-1","driverName":"csi.example.com","nodeName":"n1","attachmentID":"csi-0a1b","volumeLifecycleMode":"Persistent"}`,
		`{"volumeHandle":"vol-1","driverName":"hostpath.csi.k8s.io"}`,
		`{"specVolID":"scratch","volumeHandle":"csi-ab","driverName":"D.Example.Com","volumeLifecycleMode":"Ephemeral"}`,
		`{"volumeHandle":"../../x","driverName":"../../../../etc"}`,
		`{"volumeHandle":"v","driverName":"a/b"}`,
		`{"driverName":".."}`, `{"driverName":""}`, `{"driverName":1}`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: fuzzRoot})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := parseVolData(data)
		if err != nil {
			if d != (volData{}) {
				t.Fatalf("error %v with data %+v", err, d)
			}
			return
		}
		checkStagingDir(t, r, d.DriverName, d.VolumeHandle)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := parseVolData(b); err != nil || again != d {
			t.Fatalf("%s reads back as %+v, %v; want %+v", b, again, err, d)
		}
	})
}

// FuzzValidatePlugin: whatever name and versions a plugin registers with,
// the check ends without a panic; an accepted driver has a 1.x version and a
// name whose staging directories stay inside the plugin's directory.
func FuzzValidatePlugin(f *testing.F) {
	for _, seed := range []struct{ name, v1, v2 string }{
		{"csi.example.com", "1.0.0", ""},
		{"hostpath.csi.k8s.io", "1.0.0", "0.3.0"},
		{"Csi.Example.Com", "v1.2.3", "2.0.0"},
		{"../../../etc", "1.0.0", ""},
		{"a/b", "1.0.0", "1.0.0"},
		{"..", "0.3.0", ""},
		{"", "", ""},
		{strings.Repeat("a", 64), "1.0.0", ""},
	} {
		f.Add(seed.name, seed.v1, seed.v2)
	}
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: fuzzRoot})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, v1, v2 string) {
		versions := []string{v1}
		if v2 != "" {
			versions = append(versions, v2)
		}
		err := r.ValidatePlugin(name, "/var/lib/kubelet/plugins/x/csi.sock", versions)
		v, verr := r.validateVersions("ValidatePlugin", name, versions)
		if (err == nil) != (verr == nil) {
			t.Fatalf("ValidatePlugin = %v, validateVersions = %v", err, verr)
		}
		if err != nil {
			return
		}
		if v == nil || v.Major() != 1 {
			t.Fatalf("versions %q accepted as %v", versions, v)
		}
		checkStagingDir(t, r, name, "vol-1")
	})
}
