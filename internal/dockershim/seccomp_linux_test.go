package dockershim

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A Localhost profile is the host path the CRI names, wherever it is (critest
// writes its profiles under /tmp; a kubelet with another --root-dir keeps them
// elsewhere): any clean absolute path to a regular file of at most
// maxSeccompProfileSize bytes, symlinks on the way followed. Nothing else is
// read, and a FIFO or a device does not block the call.
func TestSeccompLocalhostProfilePath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "profiles")
	for _, d := range []string{dir, filepath.Join(dir, "dir.json")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok := filepath.Join(dir, "ok.json")
	write(ok, []byte(`{}`))
	write(filepath.Join(dir, "big.json"), make([]byte, maxSeccompProfileSize+1))
	write(filepath.Join(dir, "max.json"), make([]byte, maxSeccompProfileSize))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link.json": ok, "fifolink.json": filepath.Join(dir, "fifo.json")} {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(dir, filepath.Join(base, "linkdir")); err != nil {
		t.Fatal(err)
	}
	const field = "config.linux.security_context"
	for _, tc := range []struct {
		desc       string
		ref        string
		deprecated bool // seccomp_profile_path "localhost/<ref>"
		wantErr    string
	}{
		{desc: "file outside <root-dir>/seccomp", ref: ok},
		{desc: "deprecated localhost/ form", ref: ok, deprecated: true},
		{desc: "symlink to a profile", ref: filepath.Join(base, "link.json")},
		{desc: "through a symlinked directory", ref: filepath.Join(base, "linkdir", "ok.json")},
		{desc: "at the size cap", ref: filepath.Join(dir, "max.json")},
		{desc: "relative", ref: "ok.json", wantErr: "clean absolute path"},
		{desc: "deprecated form, relative name", ref: "ok.json", deprecated: true, wantErr: "clean absolute path"},
		{desc: "not clean", ref: dir + "/../profiles/ok.json", wantErr: "clean absolute path"},
		{desc: "missing", ref: filepath.Join(dir, "missing.json"), wantErr: "no such file"},
		{desc: "directory", ref: filepath.Join(dir, "dir.json"), wantErr: "not a regular file"},
		{desc: "FIFO", ref: filepath.Join(dir, "fifo.json"), wantErr: "not a regular file"},
		{desc: "symlink to a FIFO", ref: filepath.Join(base, "fifolink.json"), wantErr: "not a regular file"},
		{desc: "device", ref: "/dev/zero", wantErr: "not a regular file"},
		{desc: "over the size cap", ref: filepath.Join(dir, "big.json"), wantErr: "larger than"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := securityInput{field: field}
			if tc.deprecated {
				in.seccompPath = "localhost/" + tc.ref
			} else {
				in.seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: tc.ref}
			}
			opts, err := securityOpts(in)
			if tc.wantErr == "" {
				if err != nil || len(opts) != 1 || !strings.HasPrefix(opts[0], "seccomp=") {
					t.Fatalf("securityOpts(%q) = %q, %v; want the profile", tc.ref, opts, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), field+".seccomp.localhost_ref") {
				t.Fatalf("securityOpts(%q) = %q, %v; want an error naming %s.seccomp.localhost_ref with %q", tc.ref, opts, err, field, tc.wantErr)
			}
		})
	}
}
