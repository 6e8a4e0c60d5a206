package manifest

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const (
	testNode = "Node-1"
	testPath = "/etc/kubernetes/manifests/web.yaml"
	testURL  = "http://127.0.0.1:8080/pods"
)

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: web
    image: busybox:1.36
    ports:
    - containerPort: 80
`

const webJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"kube-system"},
 "spec":{"containers":[{"name":"web","image":"busybox"}]}}`

const podListJSON = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
 {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`

func TestDecodeManifest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		data    string
		path    string
		wantErr []string // substrings of the error; nil = success
		check   func(t *testing.T, pods []*v1.Pod)
	}{
		{
			desc: "YAML pod gets name suffix, namespace, node and annotations",
			data: webYAML, path: testPath,
			check: func(t *testing.T, pods []*v1.Pod) {
				p := onePod(t, pods)
				if p.Name != "web-node-1" || p.Namespace != "default" || p.Spec.NodeName != testNode {
					t.Errorf("name/namespace/node = %q/%q/%q", p.Name, p.Namespace, p.Spec.NodeName)
				}
				if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(p.UID)) {
					t.Errorf("UID %q is not 32 hex digits", p.UID)
				}
				if got := p.Annotations[kubecontainer.ConfigHashAnnotationKey]; got != string(p.UID) {
					t.Errorf("config.hash = %q, want the UID %q", got, p.UID)
				}
				if got := p.Annotations[kubecontainer.ConfigSourceAnnotationKey]; got != kubecontainer.FileSource {
					t.Errorf("config.source = %q", got)
				}
				if _, err := time.Parse(time.RFC3339Nano, p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey]); err != nil {
					t.Errorf("config.seen: %v", err)
				}
				if p.Labels["app"] != "web" || p.Status.Phase != v1.PodPending {
					t.Errorf("labels %v phase %q", p.Labels, p.Status.Phase)
				}
				want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
				if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0] != want {
					t.Errorf("tolerations = %+v", p.Spec.Tolerations)
				}
			},
		},
		{
			desc: "JSON pod keeps its namespace",
			data: webJSON, path: testPath,
			check: func(t *testing.T, pods []*v1.Pod) {
				p := onePod(t, pods)
				if p.Namespace != "kube-system" || p.Name != "web-node-1" {
					t.Errorf("got %s/%s", p.Namespace, p.Name)
				}
			},
		},
		{
			desc: "defaults applied",
			data: webYAML, path: testPath,
			check: func(t *testing.T, pods []*v1.Pod) {
				p := onePod(t, pods)
				c := p.Spec.Containers[0]
				if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Spec.DNSPolicy != v1.DNSClusterFirst ||
					*p.Spec.TerminationGracePeriodSeconds != 30 || c.ImagePullPolicy != v1.PullIfNotPresent ||
					c.Ports[0].Protocol != v1.ProtocolTCP || c.TerminationMessagePath != "/dev/termination-log" {
					t.Errorf("defaults missing: %+v", p.Spec)
				}
			},
		},
		{
			desc: "explicit UID is kept",
			data: strings.Replace(webYAML, "  name: web\n", "  name: web\n  uid: fixed-uid\n", 1), path: testPath,
			check: func(t *testing.T, pods []*v1.Pod) {
				if p := onePod(t, pods); p.UID != "fixed-uid" || p.Annotations[kubecontainer.ConfigHashAnnotationKey] != "fixed-uid" {
					t.Errorf("UID %q hash %q", p.UID, p.Annotations[kubecontainer.ConfigHashAnnotationKey])
				}
			},
		},
		{
			desc: "PodList from a URL",
			data: podListJSON, path: testURL,
			check: func(t *testing.T, pods []*v1.Pod) {
				if len(pods) != 2 || pods[0].Name != "a-node-1" || pods[1].Name != "b-node-1" {
					t.Fatalf("got %d pods", len(pods))
				}
				if pods[0].Annotations[kubecontainer.ConfigSourceAnnotationKey] != kubecontainer.HTTPSource || len(pods[0].Spec.Tolerations) != 0 {
					t.Errorf("http pod: source %q tolerations %v", pods[0].Annotations[kubecontainer.ConfigSourceAnnotationKey], pods[0].Spec.Tolerations)
				}
			},
		},
		{desc: "PodList from a file", data: podListJSON, path: testPath, wantErr: []string{testPath, `kind: Unsupported value: "PodList"`}},
		{desc: "bad YAML", data: "apiVersion: v1\nkind: Pod\n  metadata: [", path: testPath, wantErr: []string{testPath, "not valid YAML"}},
		{desc: "duplicate key", data: "apiVersion: v1\nkind: Pod\nkind: Pod\n", path: testPath, wantErr: []string{testPath, "not valid YAML"}},
		{
			desc: "unknown field", path: testPath,
			data:    strings.Replace(webYAML, "image: busybox:1.36", "imagee: busybox:1.36", 1),
			wantErr: []string{testPath, `unknown field "spec.containers[0].imagee"`},
		},
		{desc: "wrong kind", data: "apiVersion: apps/v1\nkind: Deployment\n", path: testPath, wantErr: []string{testPath, "apiVersion"}},
		{desc: "wrong kind in v1", data: "apiVersion: v1\nkind: Service\n", path: testPath, wantErr: []string{testPath, `kind: Unsupported value: "Service"`}},
		{desc: "missing kind", data: "apiVersion: v1\nmetadata: {name: x}\n", path: testPath, wantErr: []string{"kind: Required value"}},
		{desc: "not an object", data: "- a\n- b\n", path: testPath, wantErr: []string{"not an object"}},
		{desc: "empty", data: " \n", path: testPath, wantErr: []string{testPath, "empty"}},
		{
			desc: "missing name", path: testPath,
			data:    strings.Replace(webYAML, "  name: web\n", "", 1),
			wantErr: []string{testPath, "metadata.name: Required value"},
		},
		{
			desc: "invalid pod", path: testPath,
			data:    strings.Replace(webYAML, "image: busybox:1.36", `image: ""`, 1),
			wantErr: []string{testPath, "spec.containers[0].image: Required value"},
		},
		{
			desc: "static pod may not reference a secret", path: testPath,
			data:    webYAML + "  volumes:\n  - name: s\n    secret: {secretName: x}\n",
			wantErr: []string{testPath, "spec.volumes[0]", "secrets"},
		},
		{
			desc: "list item error names the item", path: testURL,
			data:    strings.Replace(podListJSON, `"name":"b"`, `"name":""`, 1),
			wantErr: []string{"items[1]", "metadata.name"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pods, err := Decode([]byte(tc.data), tc.path, testNode, Options{})
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("got %d pods, want an error", len(pods))
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			tc.check(t, pods)
		})
	}
}

func TestDecodeManifestUID(t *testing.T) {
	t.Parallel()
	edited := strings.Replace(webYAML, "busybox:1.36", "busybox:1.37", 1)
	tests := []struct {
		desc       string
		data1      string
		path1      string
		node1      string
		data2      string
		path2      string
		node2      string
		wantSameID bool
	}{
		{"same manifest, same node", webYAML, testPath, testNode, webYAML, testPath, testNode, true},
		{"edited manifest", webYAML, testPath, testNode, edited, testPath, testNode, false},
		{"other node", webYAML, testPath, testNode, webYAML, testPath, "node-2", false},
		{"other file", webYAML, testPath, testNode, webYAML, "/etc/kubernetes/manifests/web2.yaml", testNode, false},
		{"JSON and YAML of the same pod", webJSON, testPath, testNode,
			"apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: kube-system}\nspec:\n  containers: [{name: web, image: busybox}]\n",
			testPath, testNode, true},
		{"URL pods ignore the node, as upstream", webYAML, testURL, testNode, webYAML, testURL, "node-2", true},
		{"other URL", webYAML, testURL, testNode, webYAML, testURL + "2", testNode, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p1 := decodeOne(t, tc.data1, tc.path1, tc.node1)
			p2 := decodeOne(t, tc.data2, tc.path2, tc.node2)
			if same := p1.UID == p2.UID; same != tc.wantSameID {
				t.Errorf("UIDs %q and %q: same=%v, want %v", p1.UID, p2.UID, same, tc.wantSameID)
			}
		})
	}
}

func decodeOne(t *testing.T, data, path, node string) *v1.Pod {
	t.Helper()
	pods, err := Decode([]byte(data), path, node, Options{})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return onePod(t, pods)
}

func onePod(t *testing.T, pods []*v1.Pod) *v1.Pod {
	t.Helper()
	if len(pods) != 1 {
		t.Fatalf("got %d pods, want 1", len(pods))
	}
	return pods[0]
}
