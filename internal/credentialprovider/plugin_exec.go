package credentialprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/kubelet/pkg/apis/credentialprovider/install"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	credentialproviderv1alpha1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1alpha1"
	credentialproviderv1beta1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1beta1"
)

const (
	// pluginTimeout bounds one plugin run, as upstream's catch-all minute.
	pluginTimeout = time.Minute
	// pluginWaitDelay bounds the wait for a killed plugin's output pipes
	// (children of the plugin may hold them open).
	pluginWaitDelay = 5 * time.Second
)

// pluginAPIVersions are the exec protocol versions a provider may speak.
func pluginAPIVersions() map[string]schema.GroupVersion {
	return map[string]schema.GroupVersion{
		credentialproviderv1alpha1.SchemeGroupVersion.String(): credentialproviderv1alpha1.SchemeGroupVersion,
		credentialproviderv1beta1.SchemeGroupVersion.String():  credentialproviderv1beta1.SchemeGroupVersion,
		credentialproviderv1.SchemeGroupVersion.String():       credentialproviderv1.SchemeGroupVersion,
	}
}

// newProtocolCodecs returns the codecs of the exec protocol: every version
// converts to and from the internal request and response types.
func newProtocolCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}

// execPlugin runs one provider's binary: the request on stdin, the response
// on stdout.
type execPlugin struct {
	name       string
	path       string // the binary
	apiVersion string
	args       []string
	env        []string // NAME=value from the config, after the kubelet's own
	environ    func() []string
	encoder    runtime.Encoder
	decoder    runtime.Decoder
}

// run asks the plugin for image's credentials, with a service account token
// and annotations for a provider with tokenAttributes.
func (e *execPlugin) run(ctx context.Context, image, token string, annotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	request, err := runtime.Encode(e.encoder, &credentialproviderapi.CredentialProviderRequest{Image: image,
		ServiceAccountToken: token, ServiceAccountAnnotations: annotations})
	if err != nil {
		return nil, fmt.Errorf("failed to encode auth request: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e.path, e.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(request), &stdout, &stderr
	cmd.Env = append(e.environ(), e.env...) // the config's values win
	cmd.WaitDelay = pluginWaitDelay

	err = cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("error execing credential provider plugin %s for image %s: %w: %s", e.name, image, err, stderr.String())
	}
	return e.decodeResponse(stdout.Bytes())
}

// decodeResponse checks the response's apiVersion against the provider's and
// decodes it strictly.
func (e *execPlugin) decodeResponse(data []byte) (*credentialproviderapi.CredentialProviderResponse, error) {
	gvk, err := json.DefaultMetaFactory.Interpret(data)
	if err != nil {
		return nil, fmt.Errorf("error reading GVK from response: %w", err)
	}
	if got := gvk.GroupVersion().String(); got != e.apiVersion {
		return nil, fmt.Errorf("apiVersion from credential plugin response did not match expected apiVersion:%s, actual apiVersion:%s", e.apiVersion, got)
	}
	obj, gvk, err := e.decoder.Decode(data, nil, nil)
	if err == nil && (gvk.Kind != "CredentialProviderResponse" || gvk.Group != credentialproviderapi.GroupName) {
		err = errors.New("unexpected kind")
	}
	response, ok := obj.(*credentialproviderapi.CredentialProviderResponse)
	if err != nil || !ok {
		// The decode error is dropped: it may quote the credentials.
		return nil, errors.New("error decoding credential provider plugin response from stdout")
	}
	return response, nil
}
