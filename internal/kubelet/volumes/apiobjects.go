package volumes

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIObjects reads the API objects that configMap, secret and projected volumes
// need. The kubelet passes a client-go backed implementation (internal/kubelet/apiobjects);
// tests pass fakes. Missing objects are reported with errors for which
// apierrors.IsNotFound is true.
type APIObjects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// TrustBundles gives the trust anchors of clusterTrustBundle projections
// (upstream's clustertrustbundle.Manager): the certificates of one
// ClusterTrustBundle, or of those of a signer a label selector selects,
// deduplicated and PEM-encoded; an empty result when allowMissing and none
// is found. internal/kubelet/apiobjects implements it.
type TrustBundles interface {
	TrustAnchorsByName(ctx context.Context, name string, allowMissing bool) ([]byte, error)
	TrustAnchorsBySigner(ctx context.Context, signerName string, selector *metav1.LabelSelector, allowMissing bool) ([]byte, error)
}

// PodCertificates gives the credentials of podCertificate projections
// (upstream's podcertificate.Manager): the PEM private key and certificate
// chain of the source at index of pod's volume, waiting for the first
// issuance. internal/kubelet/podcerts implements it.
type PodCertificates interface {
	CredentialBundle(ctx context.Context, pod *v1.Pod, volume string, index int, signer string) (key, chain []byte, err error)
}

// Resource names used in "not found" messages, as the upstream kubelet's object
// managers print them (`configmap "x" not found`).
var (
	configMapResource = schema.GroupResource{Resource: "configmap"}
	secretResource    = schema.GroupResource{Resource: "secret"}
)

// getConfigMap fetches a configMap. found is false (and err nil) when it is missing
// and optional; a missing required one gives `configmap "x" not found`.
func getConfigMap(ctx context.Context, objs APIObjects, namespace, name string, optional bool) (cm *v1.ConfigMap, found bool, err error) {
	cm, err = objs.GetConfigMap(ctx, namespace, name)
	return checkFetched(cm, err, configMapResource, namespace, name, optional)
}

// getSecret is getConfigMap for secrets.
func getSecret(ctx context.Context, objs APIObjects, namespace, name string, optional bool) (s *v1.Secret, found bool, err error) {
	s, err = objs.GetSecret(ctx, namespace, name)
	return checkFetched(s, err, secretResource, namespace, name, optional)
}

func checkFetched[T any](obj *T, err error, gr schema.GroupResource, namespace, name string, optional bool) (*T, bool, error) {
	switch {
	case apierrors.IsNotFound(err) && optional:
		return nil, false, nil
	case apierrors.IsNotFound(err):
		return nil, false, apierrors.NewNotFound(gr, name)
	case err != nil:
		return nil, false, fmt.Errorf("get %s %s/%s: %w", gr.Resource, namespace, name, err)
	case obj == nil:
		return nil, false, fmt.Errorf("get %s %s/%s: no object returned", gr.Resource, namespace, name)
	}
	return obj, true, nil
}
