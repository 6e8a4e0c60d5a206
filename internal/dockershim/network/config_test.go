package network

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

const (
	testConflistA = `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	testConflistB = `{"cniVersion":"1.0.0","name":"net-b","plugins":[{"type":"ptp"}]}`
	testConfC     = `{"cniVersion":"0.4.0","name":"net-c","type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`
	testConfUnsup = `{"cniVersion":"1.0.0","name":"net-x","plugins":[{"type":"unsupported"}]}`
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rejectUnsupported fails lists that use the plugin type "unsupported".
func rejectUnsupported(_ context.Context, list *libcni.NetworkConfigList) error {
	for _, p := range list.Plugins {
		if p.Network.Type == "unsupported" {
			return errors.New("failed to find plugin \"unsupported\"")
		}
	}
	return nil
}

func TestSelectDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		files       map[string]string
		noDir       bool
		wantFile    string
		wantNetwork string
		wantPlugins int
		wantErr     []string // substrings of the error
	}{
		{
			desc:    "missing dir",
			noDir:   true,
			wantErr: []string{"no network config found in "},
		},
		{
			desc:    "empty dir",
			wantErr: []string{"no network config found in "},
		},
		{
			desc:    "other extensions and directories are ignored",
			files:   map[string]string{"readme.txt": testConflistA, "00-dir.conf/": "", "x.conflist.bak": testConflistA},
			wantErr: []string{"no network config found in "},
		},
		{
			desc:        "lexical order across extensions",
			files:       map[string]string{"20-b.conflist": testConflistB, "10-a.conflist": testConflistA, "30-c.conf": testConfC},
			wantFile:    "10-a.conflist",
			wantNetwork: "net-a",
			wantPlugins: 2,
		},
		{
			desc:        "a .conf sorting first is wrapped into a list",
			files:       map[string]string{"05-c.conf": testConfC, "10-a.conflist": testConflistA},
			wantFile:    "05-c.conf",
			wantNetwork: "net-c",
			wantPlugins: 1,
		},
		{
			desc:        "a .json file counts as a single-plugin conf",
			files:       map[string]string{"50-c.json": testConfC},
			wantFile:    "50-c.json",
			wantNetwork: "net-c",
			wantPlugins: 1,
		},
		{
			desc:        "invalid files are skipped",
			files:       map[string]string{"01-broken.conflist": "{not json", "02-notype.conf": `{"name":"n","cniVersion":"1.0.0"}`, "03-b.conflist": testConflistB},
			wantFile:    "03-b.conflist",
			wantNetwork: "net-b",
			wantPlugins: 1,
		},
		{
			desc:        "a list whose plugins fail validation is skipped",
			files:       map[string]string{"01-x.conflist": testConfUnsup, "02-a.conflist": testConflistA},
			wantFile:    "02-a.conflist",
			wantNetwork: "net-a",
			wantPlugins: 2,
		},
		{
			desc: "no valid file: the error names each file and why",
			files: map[string]string{
				"01-broken.conflist":    "{not json",
				"02-noname.conflist":    `{"cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}`,
				"03-noplugins.conflist": `{"cniVersion":"1.0.0","name":"empty","plugins":[]}`,
				"04-x.conflist":         testConfUnsup,
			},
			wantErr: []string{
				"no network config found in ",
				"01-broken.conflist: ",
				"02-noname.conflist: ",
				"03-noplugins.conflist: ",
				`04-x.conflist: failed to find plugin "unsupported"`,
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.noDir {
				dir = filepath.Join(dir, "missing")
			}
			writeFiles(t, dir, tc.files)
			net, err := selectDefault(context.Background(), dir, rejectUnsupported)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got network from %s, want error", net.file)
				}
				if !errors.Is(err, ErrNoNetworkConfig) {
					t.Errorf("error %v does not wrap ErrNoNetworkConfig", err)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				if !strings.Contains(err.Error(), dir) {
					t.Errorf("error %q does not name the dir %s", err, dir)
				}
				return
			}
			if err != nil {
				t.Fatalf("selectDefault: %v", err)
			}
			if got := filepath.Base(net.file); got != tc.wantFile {
				t.Errorf("file = %s, want %s", got, tc.wantFile)
			}
			if net.list.Name != tc.wantNetwork {
				t.Errorf("network = %s, want %s", net.list.Name, tc.wantNetwork)
			}
			if len(net.list.Plugins) != tc.wantPlugins {
				t.Errorf("plugins = %d, want %d", len(net.list.Plugins), tc.wantPlugins)
			}
		})
	}
}

func TestWrapPluginConfKeepsPluginJSON(t *testing.T) {
	t.Parallel()
	conf, err := libcni.NetworkPluginConfFromBytes([]byte(testConfC))
	if err != nil {
		t.Fatal(err)
	}
	list, err := wrapPluginConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	if list.Name != "net-c" || list.CNIVersion != "0.4.0" || len(list.Plugins) != 1 {
		t.Fatalf("list = %s/%s with %d plugins", list.Name, list.CNIVersion, len(list.Plugins))
	}
	p := list.Plugins[0]
	if p.Network.Type != "bridge" || p.Network.IPAM.Type != "host-local" {
		t.Errorf("plugin = %+v", p.Network)
	}
	if !strings.Contains(string(p.Bytes), `"subnet":"10.9.0.0/24"`) {
		t.Errorf("plugin bytes lost fields: %s", p.Bytes)
	}
}

func TestStatusReloadsOnlyOnChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := New(Options{ConfDir: dir, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeCNI{}
	m.cni = fake

	err = m.Status()
	if err == nil || err.Error() != "no network config found in "+dir {
		t.Fatalf("Status() = %v, want the no-config reason", err)
	}

	writeFiles(t, dir, map[string]string{"10-a.conflist": testConflistA})
	if err := m.Status(); err != nil {
		t.Fatalf("Status() after writing a config = %v", err)
	}
	for range 5 {
		if err := m.Status(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.validateCount(); n != 1 {
		t.Errorf("config validated %d times for an unchanged dir, want 1", n)
	}

	// A new file that sorts first becomes the default.
	writeFiles(t, dir, map[string]string{"05-b.conflist": testConflistB})
	net, err := m.defaultNetwork(context.Background())
	if err != nil || net.list.Name != "net-b" {
		t.Fatalf("after adding 05-b: network %v, err %v", net, err)
	}

	// Rewriting a file in place is noticed too.
	writeFiles(t, dir, map[string]string{"05-b.conflist": strings.Replace(testConflistB, "net-b", "net-b2", 1)})
	if net, err = m.defaultNetwork(context.Background()); err != nil || net.list.Name != "net-b2" {
		t.Fatalf("after rewriting 05-b: network %v, err %v", net, err)
	}

	for _, f := range []string{"05-b.conflist", "10-a.conflist"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Status(); !errors.Is(err, ErrNoNetworkConfig) {
		t.Fatalf("Status() after removing all configs = %v", err)
	}
}
