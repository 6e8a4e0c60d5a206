package kuberuntime

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The node's default sysctls go to a sandbox only in the namespaces the pod
// has of its own, as upstream's applyPodSysctls.
func TestApplyDefaultSysctls(t *testing.T) {
	t.Parallel()
	defaults := map[string]string{
		"kernel.shm_rmid_forced": "1", "fs/mqueue/msg_max": "20", "net.ipv4.ip_forward": "1",
		"user.max_user_namespaces": "5", "kernel.domainname": "example.com",
	}
	all := map[string]string{"kernel.shm_rmid_forced": "1", "fs.mqueue.msg_max": "20", "net.ipv4.ip_forward": "1", "kernel.domainname": "example.com"}
	for _, tc := range []struct {
		desc string
		spec v1.PodSpec
		want map[string]string
	}{
		{"own namespaces", v1.PodSpec{}, all},
		{"host IPC", v1.PodSpec{HostIPC: true}, map[string]string{"net.ipv4.ip_forward": "1", "kernel.domainname": "example.com"}},
		{"host network", v1.PodSpec{HostNetwork: true}, map[string]string{"kernel.shm_rmid_forced": "1", "fs.mqueue.msg_max": "20"}},
		{"user namespace", v1.PodSpec{HostUsers: ptr.To(false)}, func() map[string]string {
			m := maps.Clone(all)
			m["user.max_user_namespaces"] = "5"
			return m
		}()},
	} {
		got := map[string]string{}
		applyDefaultSysctls(got, defaults, &v1.Pod{Spec: tc.spec})
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
