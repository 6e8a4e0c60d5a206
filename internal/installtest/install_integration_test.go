// Package installtest tests scripts/install.sh: install and --rollback run
// against a target root directory (--root) laid out as a plain host or as a
// kubeadm node with upstream's kubelet and cri-dockerd, with a stub systemctl
// first on PATH that records its calls (this machine runs no systemd), and
// on a kubeadm node in a node container under a real systemd, where this
// kubelet then runs its pods (TestIntegrationInstallOnKubeadmNodeContainer).
// It has tests only; nothing imports it.
package installtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	upstreamKubelet = "#!/bin/sh\necho 'Kubernetes v1.37.1 (upstream)'\n"
	// kubeadmDropIn is the drop-in of kubeadm's packages (pkgs.k8s.io),
	// written here with a marker line so that a replacement would show.
	kubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
# (installtest: kubeadm's packages wrote this file)
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`
	upstreamUnit      = "[Unit]\nDescription=kubelet: The Kubernetes Node Agent\n[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n"
	criDockerService  = "[Unit]\nDescription=CRI Interface for Docker Application Container Engine\n[Service]\nExecStart=/usr/bin/cri-dockerd --container-runtime-endpoint fd://\n"
	criDockerSocket   = "[Unit]\nDescription=CRI Docker Socket for the API\n[Socket]\nListenStream=%t/cri-dockerd.sock\n"
	instanceConfig    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	kubeadmConfigYAML = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
	defaultKubelet    = "KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5\n"
)

// The systemctl calls expected on a kubeadm node with cri-dockerd.
var (
	installCalls = []string{
		"daemon-reload",
		"stop cri-docker.socket cri-docker.service",
		"disable cri-docker.socket cri-docker.service",
		"enable kubelet.service",
		"restart kubelet.service",
	}
	rollbackCalls = []string{
		"disable kubelet.service",
		"daemon-reload",
		"enable cri-docker.socket cri-docker.service",
		"start cri-docker.socket cri-docker.service",
		"enable kubelet.service",
		"restart kubelet.service",
	}
)

// TestIntegrationInstall installs into a fresh root, checks the result and the
// systemctl calls, installs again (idempotent), rolls back and checks that the
// root's files are the ones it started with.
func TestIntegrationInstall(t *testing.T) {
	bin := kubeletBinary(t)
	repo := moduleRoot(t)
	realBefore := realHostState(t)

	for _, tc := range []struct {
		desc string
		// files lays out the root before install (path -> content).
		files   map[string]string
		systemd bool
		// migrated holds the kubeadm files install rewrites, as rewritten;
		// every other file of files must be left as it is.
		migrated map[string]string
		// dropIn is where the kubelet's 10-kubeadm.conf drop-in is after
		// install; ourDropIn says whether it is this project's copy.
		dropIn    string
		ourDropIn bool
		// standalone: install writes /etc/default/kubelet.
		standalone                bool
		wantInstall, wantRollback []string
	}{
		{
			desc: "kubeadm node from the deb packages, cri-dockerd",
			files: map[string]string{
				"/usr/bin/kubelet":                                          upstreamKubelet,
				"/usr/lib/systemd/system/kubelet.service":                   upstreamUnit,
				"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/usr/lib/systemd/system/cri-docker.service":                criDockerService,
				"/usr/lib/systemd/system/cri-docker.socket":                 criDockerSocket,
				"/var/lib/kubelet/config.yaml":                              kubeadmConfigYAML,
				"/var/lib/kubelet/kubeadm-flags.env":                        `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/cri-dockerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"` + "\n",
				"/etc/cni/net.d/10-flannel.conflist":                        "{}\n",
			},
			systemd: true,
			migrated: map[string]string{
				"/var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/dockershim.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"` + "\n",
			},
			dropIn:       "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
			wantInstall:  installCalls,
			wantRollback: rollbackCalls,
		},
		{
			desc: "kubeadm node with its drop-in in /etc, an older kubeadm's flags",
			files: map[string]string{
				"/usr/bin/kubelet":                                      upstreamKubelet,
				"/etc/systemd/system/kubelet.service":                   upstreamUnit,
				"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/lib/systemd/system/cri-docker.service":                criDockerService,
				"/lib/systemd/system/cri-docker.socket":                 criDockerSocket,
				"/etc/default/kubelet":                                  defaultKubelet,
				"/var/lib/kubelet/config.yaml":                          kubeadmConfigYAML,
				"/var/lib/kubelet/kubeadm-flags.env":                    `KUBELET_KUBEADM_ARGS="--container-runtime=remote --container-runtime-endpoint=/run/cri-dockerd.sock --image-service-endpoint=unix:///run/cri-dockerd.sock --node-labels=role=edge"` + "\n",
			},
			systemd: true,
			migrated: map[string]string{
				"/var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime=docker --container-runtime-endpoint=unix:///var/run/dockershim.sock --image-service-endpoint=unix:///var/run/dockershim.sock --node-labels=role=edge"` + "\n",
			},
			dropIn:       "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
			wantInstall:  installCalls,
			wantRollback: rollbackCalls,
		},
		{
			desc: "kubeadm 1.34+ node (NodeLocalCRISocket): the endpoint in config.yaml and instance-config.yaml, no cri-dockerd units",
			files: map[string]string{
				"/usr/bin/kubelet":                                          upstreamKubelet,
				"/usr/lib/systemd/system/kubelet.service":                   upstreamUnit,
				"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
				"/var/lib/kubelet/config.yaml":                              kubeadmConfigYAML + "containerRuntimeEndpoint: unix:///var/run/cri-dockerd.sock\n",
				"/var/lib/kubelet/instance-config.yaml":                     instanceConfig + "containerRuntimeEndpoint: unix:///var/run/cri-dockerd.sock\n",
				"/var/lib/kubelet/kubeadm-flags.env":                        `KUBELET_KUBEADM_ARGS="--pod-infra-container-image=registry.k8s.io/pause:3.10"` + "\n",
			},
			systemd: true,
			migrated: map[string]string{
				"/var/lib/kubelet/config.yaml":          kubeadmConfigYAML + "containerRuntimeEndpoint: unix:///var/run/dockershim.sock\n",
				"/var/lib/kubelet/instance-config.yaml": instanceConfig + "containerRuntimeEndpoint: unix:///var/run/dockershim.sock\n",
			},
			dropIn:       "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
			wantInstall:  []string{"daemon-reload", "enable kubelet.service", "restart kubelet.service"},
			wantRollback: []string{"disable kubelet.service", "daemon-reload", "enable kubelet.service", "restart kubelet.service"},
		},
		{
			desc:       "standalone host without systemd",
			files:      map[string]string{},
			dropIn:     "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
			ourDropIn:  true,
			standalone: true,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHost(t, tc.files, tc.systemd)
			before := h.snapshot(t)

			h.run(t, bin, repo)
			h.checkInstalled(t, bin, repo, tc.files, tc.standalone)
			h.checkMigrated(t, tc.files, tc.migrated)
			if tc.ourDropIn {
				if want := readFile(t, filepath.Join(repo, "systemd/kubelet.service.d/10-kubeadm.conf")); h.read(t, tc.dropIn) != want {
					t.Errorf("%s is not the project's drop-in", tc.dropIn)
				}
			} else {
				if got := h.read(t, tc.dropIn); got != kubeadmDropIn {
					t.Errorf("kubeadm's drop-in %s changed:\n%s", tc.dropIn, got)
				}
				if tc.dropIn != "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf" && h.exists("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf") {
					t.Errorf("install put a drop-in in /etc/systemd/system that shadows kubeadm's %s", tc.dropIn)
				}
			}
			if got := h.read(t, "/etc/default/kubelet"); tc.standalone != strings.Contains(got, "--config=/etc/kubernetes/kubelet-config.yaml") {
				t.Errorf("/etc/default/kubelet (standalone=%v): %q", tc.standalone, got)
			}
			h.checkCalls(t, tc.wantInstall)

			// Installing again changes nothing and keeps the backups.
			afterFirst := h.snapshot(t)
			h.run(t, bin, repo)
			if diff := diffSnapshots(afterFirst, h.snapshot(t)); diff != "" {
				t.Errorf("a second install changed the root:\n%s", diff)
			}
			h.checkCalls(t, tc.wantInstall)

			h.run(t, bin, repo, "--rollback")
			if diff := diffSnapshots(before, h.snapshot(t)); diff != "" {
				t.Errorf("after --rollback the root differs from before install:\n%s", diff)
			}
			h.checkCalls(t, tc.wantRollback)
		})
	}

	if after := realHostState(t); !reflect.DeepEqual(realBefore, after) {
		t.Errorf("install.sh --root touched the real host:\nbefore %v\nafter  %v", realBefore, after)
	}
}

// host is a target root with a stub systemctl that logs its calls.
type host struct {
	root, stubDir, callLog string
}

func newHost(t *testing.T, files map[string]string, systemd bool) *host {
	t.Helper()
	dir := t.TempDir()
	h := &host{root: filepath.Join(dir, "root"), stubDir: filepath.Join(dir, "stub"), callLog: filepath.Join(dir, "systemctl.log")}
	for p, content := range files {
		mode := os.FileMode(0o644)
		if p == "/usr/bin/kubelet" {
			mode = 0o755
		}
		writeFile(t, h.path(p), content, mode)
	}
	if systemd {
		mkdir(t, h.path("/run/systemd/system"))
	} else {
		mkdir(t, h.root)
	}
	stub := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>'" + h.callLog + "'\n"
	writeFile(t, filepath.Join(h.stubDir, "systemctl"), stub, 0o755)
	return h
}

func (h *host) path(p string) string { return filepath.Join(h.root, p) }

func (h *host) exists(p string) bool {
	_, err := os.Lstat(h.path(p))
	return err == nil
}

// read returns the file's content, "" when it does not exist.
func (h *host) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(h.path(p))
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run runs scripts/install.sh --root on the host with the prebuilt binary.
func (h *host) run(t *testing.T, bin, repo string, args ...string) {
	t.Helper()
	if err := os.Remove(h.callLog); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repo, "scripts/install.sh"), "--root", h.root}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+h.stubDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KDS_KUBELET_BIN="+bin)
	out, err := cmd.CombinedOutput()
	name := strings.Join(append([]string{"install.sh"}, args...), " ")
	t.Logf("%s:\n%s", name, out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// checkInstalled checks the files every install puts in place, and the
// default CNI config, which only a standalone node gets (when it has none):
// a kubeadm node's pod network is its cluster's add-on's, even before the
// add-on has written its config.
func (h *host) checkInstalled(t *testing.T, bin, repo string, files map[string]string, standalone bool) {
	t.Helper()
	if got, want := fileHash(t, h.path("/usr/bin/kubelet")), fileHash(t, bin); got != want {
		t.Errorf("/usr/bin/kubelet is not the built kubelet")
	}
	if orig, ok := files["/usr/bin/kubelet"]; ok {
		if got := h.read(t, "/usr/bin/kubelet.upstream"); got != orig {
			t.Errorf("/usr/bin/kubelet.upstream: got %q, want upstream's kubelet", got)
		}
	} else if h.exists("/usr/bin/kubelet.upstream") {
		t.Errorf("/usr/bin/kubelet.upstream exists without an upstream kubelet")
	}
	for dest, src := range map[string]string{
		"/etc/systemd/system/kubelet.service": "systemd/kubelet.service",
		"/etc/kubernetes/kubelet-config.yaml": "configs/kubelet-config.yaml",
	} {
		if h.read(t, dest) != readFile(t, filepath.Join(repo, src)) {
			t.Errorf("%s is not the project's %s", dest, src)
		}
	}
	_, flannel := files["/etc/cni/net.d/10-flannel.conflist"]
	if want := standalone && !flannel; h.exists("/etc/cni/net.d/10-dockershim-bridge.conflist") != want {
		t.Errorf("default CNI config installed: %v, want %v (standalone node %v, with a CNI config %v)", !want, want, standalone, flannel)
	}
}

// checkMigrated checks kubeadm's files after install: those in migrated are
// rewritten and their originals kept next to them, the others are untouched.
func (h *host) checkMigrated(t *testing.T, files, migrated map[string]string) {
	t.Helper()
	for _, p := range []string{"/var/lib/kubelet/kubeadm-flags.env", "/var/lib/kubelet/config.yaml", "/var/lib/kubelet/instance-config.yaml"} {
		orig, backup := files[p], p+".pre-kubelet-dockershim"
		want, ok := migrated[p]
		if !ok {
			if got := h.read(t, p); got != orig {
				t.Errorf("%s changed:\n got %q\nwant %q", p, got, orig)
			}
			if h.exists(backup) {
				t.Errorf("%s exists, but %s was not to change", backup, p)
			}
			continue
		}
		if got := h.read(t, p); got != want {
			t.Errorf("%s after install:\n got %q\nwant %q", p, got, want)
		}
		if got := h.read(t, backup); got != orig {
			t.Errorf("%s: got %q, want the original %q", backup, got, orig)
		}
	}
}

// checkCalls compares the systemctl calls of the last run.
func (h *host) checkCalls(t *testing.T, want []string) {
	t.Helper()
	var got []string
	if b, err := os.ReadFile(h.callLog); err == nil {
		got = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("systemctl calls:\n got %q\nwant %q", got, want)
	}
}

// snapshot maps every regular file and symlink under the root to its mode
// and content hash; directories are left out (install may leave empty ones).
func (h *host) snapshot(t *testing.T) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, h.root)
		if info.Mode().IsRegular() {
			snap[rel] = info.Mode().String() + " " + fileHash(t, p)
		} else {
			snap[rel] = info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnapshots(a, b map[string]string) string {
	var diff []string
	for p, v := range a {
		if w, ok := b[p]; !ok {
			diff = append(diff, "- "+p)
		} else if v != w {
			diff = append(diff, "~ "+p+" ("+v+" -> "+w+")")
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			diff = append(diff, "+ "+p)
		}
	}
	return strings.Join(diff, "\n")
}

// realHostState records what install.sh would change on the real host.
func realHostState(t *testing.T) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, p := range []string{
		"/usr/bin/kubelet", "/usr/bin/kubelet.upstream",
		"/etc/systemd/system/kubelet.service", "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"/etc/kubernetes/kubelet-config.yaml", "/etc/default/kubelet",
		"/var/lib/kubelet/kubeadm-flags.env", "/var/lib/kubelet-dockershim/install",
	} {
		if info, err := os.Stat(p); err == nil {
			state[p] = info.ModTime().String() + " " + info.Mode().String()
		}
	}
	return state
}

// kubeletBinary returns $KDS_KUBELET_BIN, or builds the module root into the
// test's temp dir.
func kubeletBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("KDS_KUBELET_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "kubelet")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func fileHash(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}
