//go:build linux

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/registry"
)

// testCredentialProviderToken (issue 30 item 3): a credential provider with
// tokenAttributes (audience e2e-registry-<ns>, a required service account
// annotation, cacheType ServiceAccount) answers for a password-protected
// registry, and pods pull from it with imagePullPolicy Always and no pull
// secret.
//   - A pod of service account "puller" (annotated) runs: the plugin got a
//     token of the API server for the audience, bound to the pod and its
//     service account, and the required and optional annotations.
//   - A pod of service account "plain" (not annotated) never pulls: the
//     plugin is not run, the pull has no credentials (ErrImagePull or
//     ImagePullBackOff).
//
// The node may ask for tokens of that audience through RBAC's
// request-serviceaccounts-token-audience verb (NodeRestriction's
// ServiceAccountNodeAudienceRestriction).
func testCredentialProviderToken(t *testing.T, c *controlplane.Cluster) {
	const user, pass = "satoken", "s3cret-sa"
	n := newClusterNode(t, c)
	n.createNamespace()
	reg := registry.Start(t, user, pass)
	_, port, _ := strings.Cut(reg, ":")
	image := pushPrivateBusybox(t, n.node, reg, user, pass)
	audience := "e2e-registry-" + n.ns

	requests := filepath.Join(n.dir, "requests")
	providers, bin := writeCredentialProvider(t, n.dir, "sa-provider", "cat >>"+requests+"\necho >>"+requests, port, user, pass, `  tokenAttributes:
    serviceAccountTokenAudience: `+audience+`
    requireServiceAccount: true
    cacheType: ServiceAccount
    requiredServiceAccountAnnotationKeys: [e2e.example.com/pull]
    optionalServiceAccountAnnotationKeys: [e2e.example.com/team, e2e.example.com/absent]
`)
	n.extra = append(n.extra, "--image-credential-provider-config="+providers, "--image-credential-provider-bin-dir="+bin)

	role := "e2e-token-audience-" + n.ns
	n.deleteAtEnd("clusterrole/"+role, "clusterrolebinding/"+role)
	n.applyYAML(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [""], resources: [%[2]s], verbs: [request-serviceaccounts-token-audience]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: puller
  namespace: @NS@
  annotations: {e2e.example.com/pull: "yes", e2e.example.com/team: build}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: plain, namespace: @NS@}
`, role, audience))
	pod := func(name, sa string) string {
		y := strings.Replace(n.boundPodYAML(name, 1, `[sleep, "3600"]`), "spec:\n", "spec:\n  serviceAccountName: "+sa+"\n", 1)
		y = strings.Replace(y, "image: @IMAGE@", "image: "+image, 1)
		return strings.Replace(y, "imagePullPolicy: Never", "imagePullPolicy: Always", 1)
	}
	n.start()
	n.waitNodeReady(90 * time.Second)
	n.applyYAML(pod("puller", "puller") + "---\n" + pod("plain", "plain"))

	p := n.waitAPIPod("puller", podStartTimeout, "running with the image pulled with the plugin's credentials", runningAndReady)
	n.waitAPIPod("plain", 90*time.Second, "waiting on its pull without credentials", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	})

	data, err := os.ReadFile(requests)
	if err != nil {
		t.Fatalf("the plugin never ran: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Errorf("the plugin ran %d times, want once (for pod puller only):\n%s", len(lines), data)
	}
	var req struct {
		Image       string            `json:"image"`
		Token       string            `json:"serviceAccountToken"`
		Annotations map[string]string `json:"serviceAccountAnnotations"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &req); err != nil {
		t.Fatalf("request %q: %v", lines[0], err)
	}
	if want := map[string]string{"e2e.example.com/pull": "yes", "e2e.example.com/team": "build"}; !reflect.DeepEqual(req.Annotations, want) {
		t.Errorf("annotations sent %v, want %v", req.Annotations, want)
	}
	claims := jwtClaims(t, req.Token)
	saUID := strings.TrimSpace(n.kubectl("", "get", "serviceaccount", "puller", "-n", n.ns, "-o", "jsonpath={.metadata.uid}"))
	if len(claims.Aud) != 1 || claims.Aud[0] != audience || claims.K8s.Namespace != n.ns ||
		claims.K8s.Pod.Name != "puller" || claims.K8s.Pod.UID != string(p.UID) ||
		claims.K8s.ServiceAccount.Name != "puller" || claims.K8s.ServiceAccount.UID != saUID {
		t.Errorf("token claims %+v, want audience %s, pod puller %s, service account puller %s", claims, audience, p.UID, saUID)
	}
}

// saTokenClaims are the claims of a bound service account token.
type saTokenClaims struct {
	Aud []string `json:"aud"`
	K8s struct {
		Namespace string `json:"namespace"`
		Pod       struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// jwtClaims decodes a JWT's payload (the signature is the API server's to check).
func jwtClaims(t *testing.T, token string) saTokenClaims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is no JWT", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("token payload: %v", err)
	}
	var c saTokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatalf("token claims %s: %v", payload, err)
	}
	return c
}
