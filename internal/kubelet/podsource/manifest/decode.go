package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource/core"
)

// MaxBytes caps one manifest file or URL body (upstream maxConfigLength).
const MaxBytes = 10 << 20

// ErrInvalid is wrapped by every error Decode returns.
var ErrInvalid = errors.New("invalid pod manifest")

// typeMeta is the part of a manifest read before the strict decode.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// manifestSource says where a manifest came from; it feeds the UID hash and the
// source-specific defaults.
type manifestSource struct {
	path     string // file path or URL
	nodeName string
	isURL    bool
	opts     Options
}

// Options are the feature gates a manifest is validated with; the zero value
// is upstream's defaults.
type Options struct {
	// RefuseRestartAllContainers is RestartAllContainersOnContainerExits
	// off: a restart rule with the RestartAllContainers action is refused.
	RefuseRestartAllContainers bool
}

func (s manifestSource) name() string {
	if s.isURL {
		return kubecontainer.HTTPSource
	}
	return kubecontainer.FileSource
}

// Decode decodes one manifest (YAML or JSON) into pods ready to run on nodeName.
// path is the manifest's file path, or the URL (http:// or https://) for the http source;
// only a URL may hold a v1 PodList, a file holds exactly one v1 Pod. Every pod is
// defaulted (SetDefaults), then, as upstream's applyDefaults does: the UID (unless the
// manifest sets one) is a 128-bit FNV-1a hash of the defaulted pod's JSON followed by
// "host:<nodeName>" and "file:<path>" (or "url:<url>"), so the same manifest on the same
// node always gets the same UID and an edit gets a new one; the name becomes
// "<name>-<lowercased nodeName>", the namespace defaults to "default", Spec.NodeName is set,
// the annotations config.source, config.hash (= the UID) and config.seen (now) are set,
// file pods tolerate every NoExecute taint, and the phase is Pending. The result is then
// validated (Validate) and checked for references to API objects, which static pods may
// not have. Errors wrap ErrInvalid and name the path and the offending field.
func Decode(data []byte, path, nodeName string, opts Options) ([]*v1.Pod, error) {
	src := manifestSource{path: path, nodeName: nodeName, isURL: isURL(path), opts: opts}
	pods, err := src.decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalid, path, err)
	}
	return pods, nil
}

func isURL(path string) bool {
	return strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://")
}

func (s manifestSource) decode(data []byte) ([]*v1.Pod, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("manifest is larger than %d bytes", MaxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("manifest is empty")
	}
	// JSON is YAML, so one conversion handles both; the strict variant rejects duplicate keys.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil || bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, errors.New("manifest is not an object")
	}
	switch {
	case tm.Kind == "":
		return nil, errors.New(`kind: Required value: want "Pod"`)
	case tm.APIVersion != "v1":
		return nil, fmt.Errorf("apiVersion: Unsupported value: %q: want \"v1\"", tm.APIVersion)
	case tm.Kind == "Pod":
		var pod v1.Pod
		if err := strictUnmarshal(js, &pod); err != nil {
			return nil, err
		}
		if err := s.preparePod(&pod); err != nil {
			return nil, err
		}
		return []*v1.Pod{&pod}, nil
	case tm.Kind == "PodList" && s.isURL:
		return s.decodeList(js)
	}
	want := `"Pod"`
	if s.isURL {
		want = `"Pod" or "PodList"`
	}
	return nil, fmt.Errorf("kind: Unsupported value: %q: want %s", tm.Kind, want)
}

func (s manifestSource) decodeList(js []byte) ([]*v1.Pod, error) {
	var list v1.PodList
	if err := strictUnmarshal(js, &list); err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		if err := s.preparePod(pod); err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// strictUnmarshal decodes JSON case-sensitively and fails on unknown or duplicate fields,
// naming each by its path (e.g. `unknown field "spec.containers[0].imagee"`).
func strictUnmarshal(js []byte, into any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, into,
		sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return errors.Join(strictErrs...)
}

// preparePod applies the defaults and the source's settings, then validates.
func (s manifestSource) preparePod(pod *v1.Pod) error {
	if pod.Name == "" {
		return errors.New("metadata.name: Required value: name is needed for the pod")
	}
	SetDefaults(pod)
	if pod.UID == "" {
		pod.UID = s.podUID(pod)
	}
	pod.Name = pod.Name + "-" + strings.ToLower(s.nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = s.nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[kubecontainer.ConfigHashAnnotationKey] = string(pod.UID)
	pod.Annotations[kubecontainer.ConfigSourceAnnotationKey] = s.name()
	pod.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = time.Now().Format(time.RFC3339Nano)
	if !s.isURL {
		// Static pods must not be evicted for node problems.
		addToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	pod.Status.Phase = v1.PodPending
	if err := Validate(pod, s.opts); err != nil {
		return err
	}
	return checkAPIReferences(pod)
}

// podUID is upstream's static pod UID (core.StaticPodUID).
func (s manifestSource) podUID(pod *v1.Pod) k8stypes.UID {
	return k8stypes.UID(core.StaticPodUID(pod, s.nodeName, s.path, !s.isURL))
}

// addToleration adds t unless the pod already has an equal toleration.
func addToleration(pod *v1.Pod, t v1.Toleration) {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].MatchToleration(&t) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}
