//go:build linux && vm

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/vm"
)

// TestIntegrationVMNFS (issue 30 item 6): in-tree nfs volumes against a
// kernel NFS server. This host's kernel has neither an NFS client nor a
// server, so the test runs in the Debian 13 VM (nfs-kernel-server exporting
// /srv/nfs to 127.0.0.1), with this kubelet standalone and a static pod of
// two inline nfs volumes of that export, one readOnly:
//   - the kubelet mounts them with upstream's command (mount -t nfs, "ro"
//     for the read-only one) on <pod>/volumes/kubernetes.io~nfs/<volume>;
//   - the pod reads a file the server holds and writes one the server sees,
//     and cannot write through the read-only volume;
//   - removing the manifest unmounts both.
//
// Run by `make vm-test` (build tag vm).
func TestIntegrationVMNFS(t *testing.T) {
	s := requireSuite(t)
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: nfs, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: Never
    command: [sh, -c, "cat /rw/served > /rw/from-pod; if touch /ro/x 2>/dev/null; then echo writable; else echo refused; fi > /rw/ro-check; sleep 3600"]
    volumeMounts: [{name: rw, mountPath: /rw}, {name: ro, mountPath: /ro}]
  volumes:
  - {name: rw, nfs: {server: 127.0.0.1, path: /srv/nfs}}
  - {name: ro, nfs: {server: 127.0.0.1, path: /srv/nfs, readOnly: true}}
`
	files := map[string]string{
		"/usr/local/bin/kubelet": s.bin,
		"/etc/cni/net.d/10-bridge.conflist": writeTestFile(t, dir, "cni.conflist", `{"cniVersion":"1.0.0","name":"vmnet","plugins":[`+
			`{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},`+
			`{"type":"portmap","capabilities":{"portMappings":true}}]}`),
		"/var/lib/kubelet/config.yaml": writeTestFile(t, dir, "config.yaml", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
staticPodPath: /etc/kubernetes/manifests
failSwapOn: false
`),
	}
	v := vm.Start(t, vm.Options{Name: "nfs", Files: files, Images: []string{pauseImage, busyboxImage}})
	t.Logf("VM up in %s", v.BootTime.Round(time.Second))
	exec := func(args ...string) string {
		t.Helper()
		out, err := v.Exec(t, args...)
		if err != nil {
			t.Fatalf("%v (output %q)", err, out)
		}
		return strings.TrimSpace(out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := v.Exec(t, "journalctl", "-u", "kubelet", "--no-pager", "-n", "80")
			t.Logf("the VM's kubelet:\n%s", out)
		}
	})
	exec("sh", "-c", `mkdir -p /srv/nfs /etc/kubernetes/manifests && echo from-server > /srv/nfs/served && chmod 777 /srv/nfs &&
echo '/srv/nfs 127.0.0.1(rw,sync,no_subtree_check,no_root_squash,insecure)' > /etc/exports && systemctl restart nfs-server && exportfs -v`)
	exec("systemd-run", "--unit=kubelet", "--", "/usr/local/bin/kubelet", "--config=/var/lib/kubelet/config.yaml",
		"--pod-infra-container-image="+pauseImage, "--cni-bin-dir=/usr/lib/cni", "-v=2")
	v.Copy(t, writeTestFile(t, dir, "nfs.yaml", manifest), "/etc/kubernetes/manifests/nfs.yaml")

	poll := func(what string, timeout time.Duration, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; last state: %s", what, timeout, state)
			}
			time.Sleep(2 * time.Second)
		}
	}
	poll("the pod's files on the server", 4*time.Minute, func() (bool, string) {
		out, _ := v.Exec(t, "sh", "-c", "cat /srv/nfs/from-pod /srv/nfs/ro-check 2>&1")
		return strings.TrimSpace(out) == "from-server\nrefused", out
	})
	mounts := exec("findmnt", "-rn", "-t", "nfs,nfs4", "-o", "TARGET,SOURCE,OPTIONS")
	var rw, ro string
	for _, l := range strings.Split(mounts, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] != "127.0.0.1:/srv/nfs" || !strings.Contains(f[0], "/volumes/kubernetes.io~nfs/") {
			continue
		}
		switch {
		case strings.HasSuffix(f[0], "/kubernetes.io~nfs/rw"):
			rw = f[2]
		case strings.HasSuffix(f[0], "/kubernetes.io~nfs/ro"):
			ro = f[2]
		}
	}
	if !strings.HasPrefix(rw, "rw,") || !strings.HasPrefix(ro, "ro,") {
		t.Errorf("NFS mounts of the pod (rw %q, ro %q):\n%s", rw, ro, mounts)
	}
	if log := exec("journalctl", "-u", "kubelet", "--no-pager"); !strings.Contains(log, "Mounted NFS volume") {
		t.Errorf("no mount in the kubelet's log:\n%s", log)
	}

	exec("rm", "/etc/kubernetes/manifests/nfs.yaml")
	poll("the NFS mounts gone", 2*time.Minute, func() (bool, string) {
		out, _ := v.Exec(t, "findmnt", "-rn", "-t", "nfs,nfs4", "-o", "TARGET")
		return !strings.Contains(out, "kubernetes.io~nfs"), out
	})
}
