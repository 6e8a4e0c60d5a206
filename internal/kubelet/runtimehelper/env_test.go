package runtimehelper

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

func envPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-123",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "sa",
			Containers: []v1.Container{
				{Name: "main", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
				}},
				{Name: "side", Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
				}},
			},
		},
	}
}

func fieldEnv(path string) v1.EnvVar {
	return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
}

func resourceEnv(res, container, divisor string) v1.EnvVar {
	sel := &v1.ResourceFieldSelector{Resource: res, ContainerName: container}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: sel}}
}

func TestEnvResolution(t *testing.T) {
	t.Parallel()
	optional := true
	allocatable := fixedAllocatable{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	cmKey := &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "k"}
	optCMKey := cmKey.DeepCopy()
	optCMKey.Optional = &optional
	secretKey := &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}
	optSecretKey := secretKey.DeepCopy()
	optSecretKey.Optional = &optional
	for _, tc := range []struct {
		desc    string
		env     []v1.EnvVar
		envFrom []v1.EnvFromSource
		podIPs  []string
		want    string // "A=1,B=2"
		wantErr error
	}{
		{desc: "plain value", env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: "A=1"},
		{desc: "metadata.name", env: []v1.EnvVar{fieldEnv("metadata.name")}, want: "V=web"},
		{desc: "metadata.namespace", env: []v1.EnvVar{fieldEnv("metadata.namespace")}, want: "V=prod"},
		{desc: "metadata.uid", env: []v1.EnvVar{fieldEnv("metadata.uid")}, want: "V=uid-123"},
		{desc: "metadata.labels subscript", env: []v1.EnvVar{fieldEnv("metadata.labels['app']")}, want: "V=web"},
		{desc: "metadata.annotations subscript", env: []v1.EnvVar{fieldEnv("metadata.annotations['note']")}, want: "V=hi"},
		{desc: "metadata.labels all", env: []v1.EnvVar{fieldEnv("metadata.labels")}, want: "V=app=\"web\"\ntier=\"front\""},
		{desc: "spec.nodeName", env: []v1.EnvVar{fieldEnv("spec.nodeName")}, want: "V=node-1"},
		{desc: "spec.serviceAccountName", env: []v1.EnvVar{fieldEnv("spec.serviceAccountName")}, want: "V=sa"},
		{desc: "status.hostIP", env: []v1.EnvVar{fieldEnv("status.hostIP")}, want: "V=192.168.1.10"},
		{desc: "status.hostIPs", env: []v1.EnvVar{fieldEnv("status.hostIPs")}, want: "V=192.168.1.10"},
		{desc: "status.podIP", env: []v1.EnvVar{fieldEnv("status.podIP")}, podIPs: []string{"fd00::5", "10.1.0.5"}, want: "V=10.1.0.5"},
		{desc: "status.podIPs", env: []v1.EnvVar{fieldEnv("status.podIPs")}, podIPs: []string{"fd00::5", "10.1.0.5"}, want: "V=10.1.0.5,fd00::5"},
		{desc: "unsupported field", env: []v1.EnvVar{fieldEnv("spec.hostname")}, wantErr: errors.New("unsupported fieldPath")},
		{desc: "requests.cpu in millicores", env: []v1.EnvVar{resourceEnv("requests.cpu", "", "1m")}, want: "V=250"},
		{desc: "requests.cpu rounds up to cores", env: []v1.EnvVar{resourceEnv("requests.cpu", "", "")}, want: "V=1"},
		{desc: "requests.memory in Mi", env: []v1.EnvVar{resourceEnv("requests.memory", "", "1Mi")}, want: "V=64"},
		{desc: "limits.memory", env: []v1.EnvVar{resourceEnv("limits.memory", "", "")}, want: "V=134217728"},
		{desc: "unset limits.cpu defaults to node allocatable", env: []v1.EnvVar{resourceEnv("limits.cpu", "", "")}, want: "V=4"},
		{desc: "unset limits.ephemeral-storage defaults to allocatable", env: []v1.EnvVar{resourceEnv("limits.ephemeral-storage", "", "1Gi")}, want: "V=100"},
		{desc: "unset request is zero", env: []v1.EnvVar{resourceEnv("requests.ephemeral-storage", "", "")}, want: "V=0"},
		{desc: "other container", env: []v1.EnvVar{resourceEnv("limits.cpu", "side", "1m")}, want: "V=1500"},
		{desc: "unknown container", env: []v1.EnvVar{resourceEnv("limits.cpu", "nope", "")}, wantErr: errors.New("not found")},
		{desc: "unsupported resource", env: []v1.EnvVar{resourceEnv("limits.gpu", "", "")}, wantErr: errors.New("unsupported container resource")},
		{
			desc: "expansion of earlier variables",
			env:  []v1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)-$(A"}, {Name: "C", Value: "late"}},
			want: "A=x,B=x-$(C)-$(A)-$(A,C=late",
		},
		{desc: "expansion of a field ref", env: []v1.EnvVar{fieldEnv("metadata.name"), {Name: "B", Value: "$(V).svc"}}, want: "V=web,B=web.svc"},
		{desc: "redefinition replaces in place", env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "3"}}, want: "A=3,B=2"},
		{desc: "required configMapKeyRef", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: cmKey}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional configMapKeyRef is skipped", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: optCMKey}}, {Name: "B", Value: "b"}}, want: "B=b"},
		{desc: "required secretKeyRef", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: secretKey}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional secretKeyRef is skipped", env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: optSecretKey}}}, want: ""},
		{desc: "required envFrom configMap", envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}, wantErr: ErrNeedsAPIServer},
		{desc: "optional envFrom secret", envFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Optional: &optional}}}, env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: "A=1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := envResolver{nodeIP: net.ParseIP("192.168.1.10"), node: allocatable}
			pod := envPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.envFrom
			got, err := r.environment(context.Background(), pod, c, "", tc.podIPs)
			if tc.wantErr != nil {
				if err == nil || !(errors.Is(err, tc.wantErr) || strings.Contains(err.Error(), tc.wantErr.Error())) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := joinEnv(got); s != tc.want {
				t.Errorf("env = %q, want %q", s, tc.want)
			}
		})
	}
}

func joinEnv(envs []kubecontainer.EnvVar) string {
	parts := make([]string, 0, len(envs))
	for _, e := range envs {
		parts = append(parts, e.Name+"="+e.Value)
	}
	return strings.Join(parts, ",")
}

// fakeEnvObjects serves configMaps and secrets from maps and counts the reads.
type fakeEnvObjects struct {
	configMaps map[string]*v1.ConfigMap // by name
	secrets    map[string]*v1.Secret
	err        error // returned by every read when set
	reads      int
}

func (f *fakeEnvObjects) GetConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.configMaps[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (f *fakeEnvObjects) GetSecret(_ context.Context, _, name string) (*v1.Secret, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

// fakeServices lists services from a slice.
type fakeServices struct {
	list     []*v1.Service
	unsynced bool
	err      error
}

func (f *fakeServices) ListServices(namespace string) ([]*v1.Service, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []*v1.Service
	for _, s := range f.list {
		if s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeServices) HasSynced() bool { return !f.unsynced }

// eventLines renders the recorded events "type reason: message".
func eventLines(r *eventtest.Recorder) []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

func TestEnvFromAPIObjects(t *testing.T) {
	t.Parallel()
	yes := true
	cmRef := func(name, key string, optional bool) v1.EnvVar {
		sel := &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}
		if optional {
			sel.Optional = &yes
		}
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: sel}}
	}
	secretRef := func(name, key string, optional bool) v1.EnvVar {
		sel := &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}
		if optional {
			sel.Optional = &yes
		}
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{SecretKeyRef: sel}}
	}
	fromCM := func(name, prefix string, optional bool) v1.EnvFromSource {
		src := &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}
		if optional {
			src.Optional = &yes
		}
		return v1.EnvFromSource{Prefix: prefix, ConfigMapRef: src}
	}
	fromSecret := func(name, prefix string, optional bool) v1.EnvFromSource {
		src := &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}
		if optional {
			src.Optional = &yes
		}
		return v1.EnvFromSource{Prefix: prefix, SecretRef: src}
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cfg", errors.New("no relationship found"))
	for _, tc := range []struct {
		desc      string
		env       []v1.EnvVar
		envFrom   []v1.EnvFromSource
		readErr   error
		want      string
		wantErr   string // exact message
		notFound  bool   // the error is apierrors NotFound
		wantReads int    // 0 = not checked
		wantEvent string
	}{
		{desc: "configMapKeyRef", env: []v1.EnvVar{cmRef("cfg", "b", false)}, want: "V=2"},
		{desc: "missing configMap", env: []v1.EnvVar{cmRef("nope", "b", false)}, wantErr: `configmap "nope" not found`, notFound: true},
		{desc: "missing optional configMap", env: []v1.EnvVar{cmRef("nope", "b", true)}, want: ""},
		{desc: "missing key", env: []v1.EnvVar{cmRef("cfg", "zz", false)}, wantErr: "couldn't find key zz in ConfigMap prod/cfg"},
		{desc: "missing optional key", env: []v1.EnvVar{cmRef("cfg", "zz", true)}, want: ""},
		{desc: "binaryData is not a key", env: []v1.EnvVar{cmRef("cfg", "bin", false)}, wantErr: "couldn't find key bin in ConfigMap prod/cfg"},
		{desc: "secretKeyRef", env: []v1.EnvVar{secretRef("s", "password", false)}, want: "V=hunter2"},
		{desc: "missing secret", env: []v1.EnvVar{secretRef("nope", "k", false)}, wantErr: `secret "nope" not found`, notFound: true},
		{desc: "missing optional secret", env: []v1.EnvVar{secretRef("nope", "k", true)}, want: ""},
		{desc: "missing secret key", env: []v1.EnvVar{secretRef("s", "zz", false)}, wantErr: "couldn't find key zz in Secret prod/s"},
		{desc: "optional does not hide other errors", env: []v1.EnvVar{cmRef("cfg", "b", true)}, readErr: forbidden, wantErr: forbidden.Error()},
		{
			desc:      "each object is read once per container",
			env:       []v1.EnvVar{cmRef("cfg", "a", false), {Name: "W", ValueFrom: cmRef("cfg", "b", false).ValueFrom}},
			envFrom:   []v1.EnvFromSource{fromCM("cfg", "", false)},
			want:      "a=1,b=2,V=1,W=2",
			wantReads: 1,
		},
		{desc: "envFrom configMap, sorted keys, prefix", envFrom: []v1.EnvFromSource{fromCM("cfg", "P_", false)}, want: "P_a=1,P_b=2"},
		{desc: "envFrom secret", envFrom: []v1.EnvFromSource{fromSecret("s", "", false)}, want: "password=hunter2,user=admin"},
		{
			desc:    "env replaces envFrom in place and expands it",
			envFrom: []v1.EnvFromSource{fromCM("cfg", "", false), fromSecret("s", "", false)},
			env:     []v1.EnvVar{{Name: "b", Value: "$(user)@$(a)"}, {Name: "c", Value: "3"}},
			want:    "a=1,b=admin@1,password=hunter2,user=admin,c=3",
		},
		{desc: "later envFrom wins", envFrom: []v1.EnvFromSource{fromCM("cfg", "", false), fromCM("cfg2", "", false)}, want: "a=one,b=2"},
		{desc: "missing envFrom configMap", envFrom: []v1.EnvFromSource{fromCM("nope", "", false)}, wantErr: `configmap "nope" not found`, notFound: true},
		{desc: "missing optional envFrom secret", envFrom: []v1.EnvFromSource{fromSecret("nope", "", true)}, env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: "A=1"},
		{
			desc:      "invalid names are skipped with an event",
			envFrom:   []v1.EnvFromSource{fromCM("odd", "", false)},
			want:      "good=1",
			wantEvent: "Warning InvalidEnvironmentVariableNames: Keys [bad=key, tab\tkey] from the EnvFrom configMap prod/odd were skipped since they are considered invalid environment variable names.",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			objects := &fakeEnvObjects{
				configMaps: map[string]*v1.ConfigMap{
					"cfg":  {Data: map[string]string{"b": "2", "a": "1"}, BinaryData: map[string][]byte{"bin": {1}}},
					"cfg2": {Data: map[string]string{"a": "one"}},
					"odd":  {Data: map[string]string{"good": "1", "bad=key": "2", "tab\tkey": "3"}},
				},
				secrets: map[string]*v1.Secret{"s": {Data: map[string][]byte{"user": []byte("admin"), "password": []byte("hunter2")}}},
				err:     tc.readErr,
			}
			recorder := &eventtest.Recorder{}
			r := envResolver{nodeIP: net.ParseIP("192.168.1.10"), objects: objects, recorder: recorder, logger: zaptest.NewLogger(t)}
			pod := envPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.envFrom
			got, err := r.environment(context.Background(), pod, c, "", nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || apierrors.IsNotFound(err) != tc.notFound {
					t.Fatalf("error = %v (NotFound %v), want %q (NotFound %v)", err, apierrors.IsNotFound(err), tc.wantErr, tc.notFound)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := joinEnv(got); s != tc.want {
				t.Errorf("env = %q, want %q", s, tc.want)
			}
			if tc.wantReads != 0 && objects.reads != tc.wantReads {
				t.Errorf("reads = %d, want %d", objects.reads, tc.wantReads)
			}
			if events := strings.Join(eventLines(recorder), "\n"); events != tc.wantEvent {
				t.Errorf("events = %q, want %q", events, tc.wantEvent)
			}
		})
	}
}

func service(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceLinkEnv(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	const kubernetesEnv = "KUBERNETES_SERVICE_HOST=10.0.0.1,KUBERNETES_SERVICE_PORT=443,KUBERNETES_SERVICE_PORT_HTTPS=443," +
		"KUBERNETES_PORT=tcp://10.0.0.1:443,KUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443,KUBERNETES_PORT_443_TCP_PROTO=tcp," +
		"KUBERNETES_PORT_443_TCP_PORT=443,KUBERNETES_PORT_443_TCP_ADDR=10.0.0.1"
	const webEnv = "MY_WEB_SERVICE_HOST=10.0.0.20,MY_WEB_SERVICE_PORT=80,MY_WEB_SERVICE_PORT_HTTP=80,MY_WEB_SERVICE_PORT_DNS_UDP=53," +
		"MY_WEB_PORT=tcp://10.0.0.20:80,MY_WEB_PORT_80_TCP=tcp://10.0.0.20:80,MY_WEB_PORT_80_TCP_PROTO=tcp,MY_WEB_PORT_80_TCP_PORT=80,MY_WEB_PORT_80_TCP_ADDR=10.0.0.20," +
		"MY_WEB_PORT_53_UDP=udp://10.0.0.20:53,MY_WEB_PORT_53_UDP_PROTO=udp,MY_WEB_PORT_53_UDP_PORT=53,MY_WEB_PORT_53_UDP_ADDR=10.0.0.20"
	services := []*v1.Service{
		service("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("default", "other", "10.0.0.2", v1.ServicePort{Port: 8080}),
		service("prod", "my-web", "10.0.0.20", v1.ServicePort{Name: "http", Port: 80}, v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}),
		service("prod", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		service("prod", "external", ""),
		service("staging", "db", "10.0.0.30", v1.ServicePort{Port: 5432}),
		service("v6", "api", "fd00::10", v1.ServicePort{Port: 443}),
		service("own", "kubernetes", "10.0.0.99", v1.ServicePort{Port: 6443}),
	}
	for _, tc := range []struct {
		desc      string
		namespace string
		links     *bool
		static    bool
		unsynced  bool
		listErr   error
		env       []v1.EnvVar
		want      string
		wantErr   string
	}{
		{desc: "links by default", namespace: "prod", want: kubernetesEnv + "," + webEnv},
		{desc: "links enabled", namespace: "prod", links: &yes, want: kubernetesEnv + "," + webEnv},
		{desc: "links disabled keep kubernetes", namespace: "prod", links: &no, want: kubernetesEnv},
		{desc: "default namespace, links disabled", namespace: "default", links: &no, want: kubernetesEnv},
		{
			desc: "default namespace", namespace: "default",
			want: kubernetesEnv + ",OTHER_SERVICE_HOST=10.0.0.2,OTHER_SERVICE_PORT=8080,OTHER_PORT=tcp://10.0.0.2:8080," +
				"OTHER_PORT_8080_TCP=tcp://10.0.0.2:8080,OTHER_PORT_8080_TCP_PROTO=tcp,OTHER_PORT_8080_TCP_PORT=8080,OTHER_PORT_8080_TCP_ADDR=10.0.0.2",
		},
		{
			desc: "IPv6 cluster IP", namespace: "v6", links: &yes,
			want: "API_SERVICE_HOST=fd00::10,API_SERVICE_PORT=443,API_PORT=tcp://[fd00::10]:443,API_PORT_443_TCP=tcp://[fd00::10]:443," +
				"API_PORT_443_TCP_PROTO=tcp,API_PORT_443_TCP_PORT=443,API_PORT_443_TCP_ADDR=fd00::10," + kubernetesEnv,
		},
		{
			desc: "the namespace's own kubernetes service wins", namespace: "own",
			want: "KUBERNETES_SERVICE_HOST=10.0.0.99,KUBERNETES_SERVICE_PORT=6443,KUBERNETES_PORT=tcp://10.0.0.99:6443," +
				"KUBERNETES_PORT_6443_TCP=tcp://10.0.0.99:6443,KUBERNETES_PORT_6443_TCP_PROTO=tcp,KUBERNETES_PORT_6443_TCP_PORT=6443,KUBERNETES_PORT_6443_TCP_ADDR=10.0.0.99",
		},
		{
			desc: "env overrides in place and expands service variables", namespace: "staging", links: &no,
			env:  []v1.EnvVar{{Name: "URL", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "1"}},
			want: strings.Replace(kubernetesEnv, "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT=1", 1) + ",URL=https://10.0.0.1:443",
		},
		{desc: "API pod waits for the first list", namespace: "prod", unsynced: true, wantErr: "services have not yet been read at least once, cannot construct envvars"},
		{desc: "static pod does not wait", namespace: "prod", links: &no, unsynced: true, static: true, want: kubernetesEnv},
		{desc: "list error", namespace: "prod", listErr: errors.New("boom"), wantErr: "failed to list services when setting up env vars: boom"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := envResolver{services: &fakeServices{list: services, unsynced: tc.unsynced, err: tc.listErr}}
			pod := envPod()
			pod.Namespace = tc.namespace
			pod.Spec.EnableServiceLinks = tc.links
			if tc.static {
				pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			}
			c := &pod.Spec.Containers[0]
			c.Env = tc.env
			got, err := r.environment(context.Background(), pod, c, "", nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := joinEnv(got); s != tc.want {
				t.Errorf("env =\n%s\nwant\n%s", strings.ReplaceAll(s, ",", "\n"), strings.ReplaceAll(tc.want, ",", "\n"))
			}
		})
	}
}
