package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// rcSetImage registers an image in the fake image service with the given user.
func rcSetImage(env *rcEnv, image string, uid *int64, username string) {
	env.images.SetFakeImages([]string{image})
	env.images.Lock()
	defer env.images.Unlock()
	img := env.images.Images[image]
	if uid != nil {
		img.Uid = &runtimeapi.Int64Value{Value: *uid}
	}
	img.Username = username
}

func TestGenerateContainerConfig(t *testing.T) {
	t.Parallel()
	env := newRCEnv(t)
	rcSetImage(env, "sha256:abc", rcPtr(int64(1000)), "")
	podContainerDir := filepath.Join(t.TempDir(), "containers", "app")
	env.helper.opts = &kubecontainer.RunContainerOptions{
		Envs: []kubecontainer.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "GREETING", Value: "hi"}},
		Mounts: []kubecontainer.Mount{
			{Name: "data", ContainerPath: "/data", HostPath: "/var/lib/kubelet/pods/uid-1/volumes/data", ReadOnly: true,
				SELinuxRelabel: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		},
		Devices:         []kubecontainer.DeviceInfo{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", Permissions: "rwm"}},
		PodContainerDir: podContainerDir,
	}
	pod := rcPod("app")
	c := &pod.Spec.Containers[0]
	c.Command = []string{"httpd", "-p", "$(PORT)"}
	c.Args = []string{"$(GREETING)", "$$(GREETING)"}
	c.WorkingDir = "/srv"
	c.Stdin, c.StdinOnce, c.TTY = true, true, true
	c.Resources = rcResources(map[v1.ResourceName]string{rcCPU: "250m", rcMem: "64Mi"}, map[v1.ResourceName]string{rcCPU: "500m", rcMem: "128Mi"})

	cfg, cleanup, err := env.m.generateContainerConfig(context.Background(), c, pod, 3, "10.1.0.5", []string{"10.1.0.5"}, "sha256:abc")
	if err != nil {
		t.Fatalf("generateContainerConfig: %v", err)
	}
	cleanup()
	if env.helper.cleanups != 1 {
		t.Errorf("cleanup ran %d times, want the helper's once", env.helper.cleanups)
	}
	if cfg.GetMetadata().GetName() != "app" || cfg.GetMetadata().GetAttempt() != 3 {
		t.Errorf("metadata = %v", cfg.GetMetadata())
	}
	if cfg.GetImage().GetImage() != "sha256:abc" || cfg.GetImage().GetUserSpecifiedImage() != "busybox:1.36" {
		t.Errorf("image = %v", cfg.GetImage())
	}
	if !reflect.DeepEqual(cfg.GetCommand(), []string{"httpd", "-p", "8080"}) || !reflect.DeepEqual(cfg.GetArgs(), []string{"hi", "$(GREETING)"}) {
		t.Errorf("command %v args %v", cfg.GetCommand(), cfg.GetArgs())
	}
	if cfg.GetWorkingDir() != "/srv" || !cfg.GetStdin() || !cfg.GetStdinOnce() || !cfg.GetTty() {
		t.Errorf("workdir/stdin/tty = %q %v %v %v", cfg.GetWorkingDir(), cfg.GetStdin(), cfg.GetStdinOnce(), cfg.GetTty())
	}
	if cfg.GetLogPath() != "app/3.log" {
		t.Errorf("log path = %q", cfg.GetLogPath())
	}
	if fi, err := os.Stat(filepath.Join(env.logsDir, "ns_web_uid-1", "app")); err != nil || !fi.IsDir() {
		t.Errorf("container log directory not created: %v", err)
	}
	var envs []string
	for _, kv := range cfg.GetEnvs() {
		envs = append(envs, kv.GetKey()+"="+string(kv.GetValue()))
	}
	if !reflect.DeepEqual(envs, []string{"PORT=8080", "GREETING=hi"}) {
		t.Errorf("envs = %v", envs)
	}
	if cfg.Labels["io.kubernetes.container.name"] != "app" || cfg.Labels["io.kubernetes.pod.uid"] != "uid-1" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	if cfg.Annotations["io.kubernetes.container.restartCount"] != "3" {
		t.Errorf("annotations = %v", cfg.Annotations)
	}
	if d := cfg.GetDevices(); len(d) != 1 || d[0].GetHostPath() != "/dev/fuse" || d[0].GetContainerPath() != "/dev/fuse" || d[0].GetPermissions() != "rwm" {
		t.Errorf("devices = %v", d)
	}
	checkContainerMounts(t, cfg.GetMounts(), podContainerDir)

	res := cfg.GetLinux().GetResources()
	if res.GetCpuShares() != 256 || res.GetCpuQuota() != 50000 || res.GetCpuPeriod() != 100000 || res.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("resources = %v", res)
	}
	// Burstable: 1000 - 1000*64Mi/8Gi = 993 (integer division).
	if res.GetOomScoreAdj() != 993 {
		t.Errorf("oom_score_adj = %d, want 993", res.GetOomScoreAdj())
	}
	sc := cfg.GetLinux().GetSecurityContext()
	if sc.GetRunAsUser().GetValue() != 1000 {
		t.Errorf("runAsUser = %v, want the image's 1000", sc.GetRunAsUser())
	}
}

// checkContainerMounts checks the volume mount and the termination message mount.
func checkContainerMounts(t *testing.T, mounts []*runtimeapi.Mount, podContainerDir string) {
	t.Helper()
	if len(mounts) != 2 {
		t.Fatalf("mounts = %v, want the volume and the termination message file", mounts)
	}
	v := mounts[0]
	if v.GetContainerPath() != "/data" || v.GetHostPath() != "/var/lib/kubelet/pods/uid-1/volumes/data" || !v.GetReadonly() ||
		v.GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
		t.Errorf("volume mount = %v", v)
	}
	if v.GetSelinuxRelabel() != selinuxEnabled() {
		t.Errorf("selinux relabel = %v on a host where SELinux enabled = %v", v.GetSelinuxRelabel(), selinuxEnabled())
	}
	tm := mounts[1]
	if tm.GetContainerPath() != "/dev/termination-log" || filepath.Dir(tm.GetHostPath()) != podContainerDir || tm.GetReadonly() {
		t.Errorf("termination message mount = %v", tm)
	}
	fi, err := os.Stat(tm.GetHostPath())
	if err != nil {
		t.Fatalf("termination message file: %v", err)
	}
	if fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Errorf("termination message file mode %v size %d, want 0666 and empty", fi.Mode(), fi.Size())
	}
}

func TestGenerateContainerConfigTerminationMessageFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		dir       bool
		path      string
		mounts    []kubecontainer.Mount
		wantMount bool
	}{
		{desc: "created under the pod container dir", dir: true, path: "/dev/termination-log", wantMount: true},
		{desc: "no pod container dir", dir: false, path: "/dev/termination-log"},
		{desc: "no termination message path", dir: true, path: ""},
		{desc: "a volume already covers the path", dir: true, path: "/tmp/msg", mounts: []kubecontainer.Mount{{ContainerPath: "/tmp/msg", HostPath: "/x"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			rcSetImage(env, "busybox:1.36", nil, "")
			dir := ""
			if tc.dir {
				dir = filepath.Join(t.TempDir(), "c")
			}
			env.helper.opts = &kubecontainer.RunContainerOptions{PodContainerDir: dir, Mounts: tc.mounts}
			pod := rcPod("c")
			pod.Spec.Containers[0].TerminationMessagePath = tc.path
			cfg, _, err := env.m.generateContainerConfig(context.Background(), &pod.Spec.Containers[0], pod, 0, "", nil, "busybox:1.36")
			if err != nil {
				t.Fatalf("generateContainerConfig: %v", err)
			}
			found := 0
			for _, m := range cfg.GetMounts() {
				if tc.path != "" && m.GetContainerPath() == tc.path {
					found++
				}
			}
			switch {
			case tc.wantMount && found != 1:
				t.Errorf("mounts %v: want one termination message mount", cfg.GetMounts())
			case !tc.wantMount && len(tc.mounts) > 0 && found != 1:
				t.Errorf("mounts %v: want only the volume at %s", cfg.GetMounts(), tc.path)
			case !tc.wantMount && len(tc.mounts) == 0 && found != 0:
				t.Errorf("mounts %v: want no termination message mount", cfg.GetMounts())
			}
		})
	}
}

func TestGenerateContainerConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		setup   func(*rcEnv, *v1.Pod)
		wantMsg string
	}{
		{
			desc:    "run options fail",
			setup:   func(env *rcEnv, _ *v1.Pod) { env.helper.optsErr = errors.New("volume data not mounted") },
			wantMsg: "volume data not mounted",
		},
		{
			desc: "image status fails",
			setup: func(env *rcEnv, _ *v1.Pod) {
				env.images.InjectError("ImageStatus", errors.New("runtime down"))
			},
			wantMsg: "runtime down",
		},
		{
			desc: "runAsNonRoot with a root image",
			setup: func(env *rcEnv, p *v1.Pod) {
				rcSetImage(env, "busybox:1.36", rcPtr(int64(0)), "")
				p.Spec.SecurityContext.RunAsNonRoot = rcPtr(true)
			},
			wantMsg: "container has runAsNonRoot and image will run as root",
		},
		{
			desc: "localhost seccomp without a profile",
			setup: func(env *rcEnv, p *v1.Pod) {
				p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}
			},
			wantMsg: "localhostProfile must be set",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			rcSetImage(env, "busybox:1.36", nil, "")
			pod := rcPod("c")
			tc.setup(env, pod)
			cfg, cleanup, err := env.m.generateContainerConfig(context.Background(), &pod.Spec.Containers[0], pod, 0, "", nil, "busybox:1.36")
			if cfg != nil || err == nil {
				t.Fatalf("got config %v, err %v; want an error", cfg, err)
			}
			if cleanup == nil {
				t.Error("cleanup is nil")
			}
			if !errors.Is(err, kubecontainer.ErrCreateContainerCfg) {
				t.Errorf("err %v does not match ErrCreateContainerCfg", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) || strings.HasPrefix(err.Error(), "CreateContainerConfigError") {
				t.Errorf("message %q: want it to contain %q without the reason prefix", err.Error(), tc.wantMsg)
			}
		})
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc         string
		podSC        *v1.PodSecurityContext
		containerSC  *v1.SecurityContext
		uid          *int64
		username     string
		wantErrMatch string
	}{
		{desc: "not requested, root image", uid: rcPtr(int64(0))},
		{desc: "explicitly false", containerSC: &v1.SecurityContext{RunAsNonRoot: rcPtr(false)}, uid: rcPtr(int64(0))},
		{desc: "root image", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true)}, uid: rcPtr(int64(0)), wantErrMatch: "image will run as root"},
		{desc: "numeric non-root image", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true)}, uid: rcPtr(int64(1000))},
		{desc: "non-numeric image user", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true)}, username: "nobody", wantErrMatch: "non-numeric user (nobody)"},
		{desc: "runAsUser 0 on the pod", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true), RunAsUser: rcPtr(int64(0))}, uid: rcPtr(int64(1000)), wantErrMatch: "runAsUser breaks non-root policy"},
		{desc: "container runAsUser overrides a root image", containerSC: &v1.SecurityContext{RunAsNonRoot: rcPtr(true), RunAsUser: rcPtr(int64(1234))}, uid: rcPtr(int64(0))},
		{desc: "container runAsUser 0 overrides the pod's", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true), RunAsUser: rcPtr(int64(5))}, containerSC: &v1.SecurityContext{RunAsUser: rcPtr(int64(0))}, wantErrMatch: "breaks non-root policy"},
		{desc: "container disables the pod's requirement", podSC: &v1.PodSecurityContext{RunAsNonRoot: rcPtr(true)}, containerSC: &v1.SecurityContext{RunAsNonRoot: rcPtr(false)}, uid: rcPtr(int64(0))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := rcPod("c")
			pod.Spec.SecurityContext = tc.podSC
			pod.Spec.Containers[0].SecurityContext = tc.containerSC
			err := verifyRunAsNonRoot(pod, &pod.Spec.Containers[0], tc.uid, tc.username)
			if tc.wantErrMatch == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErrMatch != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrMatch)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErrMatch)
			}
		})
	}
}
