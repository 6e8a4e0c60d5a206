//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// kubeletCred is how a direct request to the kubelet API authenticates: a
// bearer token, a client certificate, or nothing.
type kubeletCred struct {
	token string
	cert  *tls.Certificate
}

// apiServerCred is the API server's own kubelet-client certificate
// (CN kube-apiserver-kubelet-client, O system:masters).
func apiServerCred(t testing.TB, c *controlplane.Cluster) kubeletCred {
	t.Helper()
	pki := filepath.Join(c.Dir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-kubelet-client.crt"), filepath.Join(pki, "apiserver-kubelet-client.key"))
	if err != nil {
		t.Fatalf("the API server's kubelet-client certificate: %v", err)
	}
	return kubeletCred{cert: &cert}
}

// kubeletClient is an HTTPS client for the kubelet API on 127.0.0.1:n.apiPort
// (its serving certificate is self-signed: not verified, as the API server
// does not either). It never follows redirects.
func kubeletClient(cred kubeletCred) *http.Client {
	tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's self-signed serving certificate
	if cred.cert != nil {
		tlsCfg.Certificates = []tls.Certificate{*cred.cert}
	}
	return &http.Client{
		Timeout:       20 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// kubeletDo sends one request to the kubelet API and returns the status and
// body. path goes on the wire as written (escapes and dot segments included).
func (n *clusterNode) kubeletDo(method, path string, cred kubeletCred) (int, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("https://127.0.0.1:%d%s", n.apiPort, path), nil)
	if err != nil {
		n.t.Fatalf("request %s %s: %v", method, path, err)
	}
	if cred.token != "" {
		req.Header.Set("Authorization", "Bearer "+cred.token)
	}
	resp, err := kubeletClient(cred).Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		n.t.Fatalf("%s %s: read the body: %v", method, path, err)
	}
	return resp.StatusCode, string(body)
}

// statsReaderRules are those of metrics-server's system:metrics-server role
// that reach the kubelet, with nodes/stats for the summary API.
var statsReaderRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats", "nodes/metrics"}, Verbs: []string{"get"}}}

// serviceAccountToken creates service account name in n.ns, bound (when rules
// is not nil) to a ClusterRole of rules, and returns a token of it. It waits
// until the API server's authorizer allows the account its first rule on the
// node, so that no early SubjectAccessReview is answered (and cached) as a
// denial. The ClusterRole and its binding are deleted when the test ends.
func (n *clusterNode) serviceAccountToken(name string, rules []rbacv1.PolicyRule) string {
	n.t.Helper()
	ctx := context.Background()
	cli := n.c.Client
	if _, err := cli.CoreV1().ServiceAccounts(n.ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		n.t.Fatalf("create service account %s: %v", name, err)
	}
	if rules != nil {
		role := n.ns + "-" + name
		if _, err := cli.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			n.t.Fatalf("create cluster role %s: %v", role, err)
		}
		n.t.Cleanup(func() {
			deleteIgnoringNotFound(n.t, "cluster role", cli.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{}))
		})
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: n.ns}},
		}
		if _, err := cli.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			n.t.Fatalf("create cluster role binding %s: %v", role, err)
		}
		n.t.Cleanup(func() {
			deleteIgnoringNotFound(n.t, "cluster role binding", cli.RbacV1().ClusterRoleBindings().Delete(ctx, role, metav1.DeleteOptions{}))
		})
		n.poll(30*time.Second, "RBAC allows "+name+" "+rules[0].Resources[0], func() (bool, string) {
			resource, subresource, _ := strings.Cut(rules[0].Resources[0], "/")
			sar, err := cli.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + n.ns + ":" + name,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + n.ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: rules[0].Verbs[0], Resource: resource, Subresource: subresource, Name: n.name},
			}}, metav1.CreateOptions{})
			if err != nil {
				return false, err.Error()
			}
			return sar.Status.Allowed, fmt.Sprintf("%+v", sar.Status)
		})
	}
	tr, err := cli.CoreV1().ServiceAccounts(n.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("token of %s: %v", name, err)
	}
	return tr.Status.Token
}

func deleteIgnoringNotFound(t testing.TB, what string, err error) {
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", what, err)
	}
}

// busyYAML is a pod that burns some CPU and holds 8 MiB in /dev/shm, then sleeps.
func busyYAML() string {
	return podYAML("busy", 1, `["sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; head -c 8388608 /dev/zero > /dev/shm/ballast; exec sleep 3600"]`)
}

// testStatsSummary: a metrics-server-shaped read: GET /stats/summary with the
// token of a service account allowed nodes/stats, decoded as the upstream
// Summary: the node and the pod (and its container) with nonzero CPU and
// memory; and with only_cpu_and_memory=true.
func testStatsSummary(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(busyYAML())
	p := n.waitAPIPod("busy", podStartTimeout, "running", runningAndReady)
	cred := kubeletCred{token: n.serviceAccountToken("stats-reader", statsReaderRules)}
	var summary statsv1alpha1.Summary
	start := time.Now()
	n.poll(60*time.Second, "/stats/summary shows the node and pod busy with CPU and memory", func() (bool, string) {
		code, body := n.kubeletDo(http.MethodGet, "/stats/summary", cred)
		if code == http.StatusNotFound {
			t.Fatalf("GET /stats/summary answered 404 (is the stats provider wired?): %s", body)
		}
		if code != http.StatusOK {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		summary = statsv1alpha1.Summary{}
		if err := json.Unmarshal([]byte(body), &summary); err != nil {
			t.Fatalf("decode /stats/summary: %v\n%s", err, body)
		}
		problems := summaryProblems(&summary, n.name, p)
		return len(problems) == 0, strings.Join(problems, "; ")
	})
	t.Logf("/stats/summary complete %s after the pod ran: node cpu %d ns, working set %d B; %d pods",
		time.Since(start).Round(time.Millisecond), *summary.Node.CPU.UsageCoreNanoSeconds, *summary.Node.Memory.WorkingSetBytes, len(summary.Pods))

	code, body := n.kubeletDo(http.MethodGet, "/stats/summary?only_cpu_and_memory=true", cred)
	var small statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(body), &small); code != http.StatusOK || err != nil {
		t.Fatalf("GET /stats/summary?only_cpu_and_memory=true: %d (decode: %v) %s", code, err, body)
	}
	if problems := summaryProblems(&small, n.name, p); len(problems) > 0 {
		t.Errorf("only_cpu_and_memory=true: %s", strings.Join(problems, "; "))
	}

	// (The API server's node proxy, kubectl get --raw /api/v1/nodes/<node>/proxy/...,
	// refuses loopback node addresses: "address not allowed".)
}

// summaryProblems lists what a metrics-server needs and the summary lacks:
// the node's name, CPU and memory, and pod p with its container "main", with
// nonzero cumulative CPU and working set.
func summaryProblems(s *statsv1alpha1.Summary, nodeName string, p *v1.Pod) []string {
	var problems []string
	if s.Node.NodeName != nodeName {
		problems = append(problems, fmt.Sprintf("node name %q, want %q", s.Node.NodeName, nodeName))
	}
	problems = append(problems, usageProblems("node", s.Node.CPU, s.Node.Memory)...)
	// The system containers upstream reports: the kubelet's own cgroup and
	// kubepods ("pods", which has a memory limit, so available bytes).
	sys := map[string]*statsv1alpha1.ContainerStats{}
	for i := range s.Node.SystemContainers {
		sys[s.Node.SystemContainers[i].Name] = &s.Node.SystemContainers[i]
	}
	for _, name := range []string{statsv1alpha1.SystemContainerKubelet, statsv1alpha1.SystemContainerPods} {
		if c := sys[name]; c == nil {
			problems = append(problems, "no system container "+name)
		} else {
			problems = append(problems, usageProblems("system container "+name, c.CPU, c.Memory)...)
		}
	}
	if c := sys[statsv1alpha1.SystemContainerPods]; c != nil && (c.Memory == nil || c.Memory.AvailableBytes == nil) {
		problems = append(problems, "system container pods: no available bytes under the kubepods limit")
	}
	var pod *statsv1alpha1.PodStats
	for i := range s.Pods {
		ref := s.Pods[i].PodRef
		if ref.Name == p.Name && ref.Namespace == p.Namespace {
			pod = &s.Pods[i]
		}
	}
	if pod == nil {
		return append(problems, fmt.Sprintf("pod %s/%s missing among %d pods", p.Namespace, p.Name, len(s.Pods)))
	}
	if pod.PodRef.UID != string(p.UID) {
		problems = append(problems, fmt.Sprintf("pod uid %q, want %q", pod.PodRef.UID, p.UID))
	}
	problems = append(problems, usageProblems("pod", pod.CPU, pod.Memory)...)
	for i := range pod.Containers {
		if pod.Containers[i].Name == "main" {
			return append(problems, usageProblems("container main", pod.Containers[i].CPU, pod.Containers[i].Memory)...)
		}
	}
	return append(problems, fmt.Sprintf("container main missing in pod stats %+v", pod.Containers))
}

func usageProblems(what string, cpu *statsv1alpha1.CPUStats, mem *statsv1alpha1.MemoryStats) []string {
	var problems []string
	if cpu == nil || cpu.UsageCoreNanoSeconds == nil || *cpu.UsageCoreNanoSeconds == 0 {
		problems = append(problems, what+": no cumulative CPU usage")
	}
	if mem == nil || mem.WorkingSetBytes == nil || *mem.WorkingSetBytes == 0 {
		problems = append(problems, what+": no memory working set")
	}
	return problems
}

// testAPIRefusals: requests without credentials answer 401, a service account
// without nodes/proxy (or without any role) 403 — never the data; path escapes
// in /containerLogs and /logs are refused without file content; TLS below 1.2
// is refused. The API server's own certificate is the positive control.
func testAPIRefusals(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(shellYAML())
	n.waitAPIPod("shell", podStartTimeout, "running", runningAndReady)
	stats := kubeletCred{token: n.serviceAccountToken("stats-reader", statsReaderRules)}
	nobody := kubeletCred{token: n.serviceAccountToken("nobody", nil)}
	master := apiServerCred(t, c)
	logs := "/containerLogs/" + n.ns + "/shell/main"
	n.poll(20*time.Second, "the container log holds its marker", func() (bool, string) {
		code, body := n.kubeletDo(http.MethodGet, logs, master)
		return code == http.StatusOK && strings.Contains(body, "kubelet-api-log-marker"), fmt.Sprintf("%d %s", code, body)
	})
	for _, tc := range refusalCases(n.ns, stats, nobody, master) {
		code, body := n.kubeletDo(tc.method, tc.path, tc.cred)
		if tc.want == any4xx {
			t.Logf("%s: %s %s answered %d %.100q", tc.desc, tc.method, tc.path, code, body)
		}
		refused := code >= 300 && code < 500
		if (tc.want == any4xx && !refused) || (tc.want != any4xx && code != tc.want) {
			t.Errorf("%s: %s %s answered %d, want %d: %.300s", tc.desc, tc.method, tc.path, code, tc.want, body)
		}
		if code != http.StatusOK {
			for _, secret := range []string{"kubelet-api-log-marker", "root:x:0", `"kind":"PodList"`, `"items"`} {
				if strings.Contains(body, secret) {
					t.Errorf("%s: the %d answer carries data (%q): %.300s", tc.desc, code, secret, body)
				}
			}
		}
	}

	checkTLS11Refused(t, n.apiPort)
}

// checkTLS11Refused checks that the kubelet API refuses a TLS 1.1 handshake.
func checkTLS11Refused(t *testing.T, port int) {
	t.Helper()
	tlsCfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11} //nolint:gosec // the refusal under test
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), tlsCfg)
	if err == nil {
		conn.Close()
		t.Error("the kubelet API accepted a TLS 1.1 handshake")
	}
}

// any4xx is a refusal whatever its reason: any 3xx or 4xx status.
const any4xx = -1

// refusalCase is one request to the kubelet API and the status it must get.
type refusalCase struct {
	desc, method, path string
	cred               kubeletCred
	want               int // a status, or any4xx
}

// refusalCases are the requests of testAPIRefusals to the pod shell of
// namespace ns: stats reads nodes/stats and nodes/metrics, nobody has no
// role, master is the API server's certificate.
func refusalCases(ns string, stats, nobody, master kubeletCred) []refusalCase {
	logs := "/containerLogs/" + ns + "/shell/main"
	exec := "/exec/" + ns + "/shell/main?command=cat&command=/etc/passwd&output=1"
	return []refusalCase{
		{desc: "no credentials: healthz", method: "GET", path: "/healthz", want: http.StatusUnauthorized},
		{desc: "no credentials: pods", method: "GET", path: "/pods", want: http.StatusUnauthorized},
		{desc: "no credentials: stats", method: "GET", path: "/stats/summary", want: http.StatusUnauthorized},
		{desc: "no credentials: logs", method: "GET", path: logs, want: http.StatusUnauthorized},
		{desc: "no credentials: exec", method: "POST", path: exec, want: http.StatusUnauthorized},
		{desc: "a token nobody issued", method: "GET", path: "/pods", cred: kubeletCred{token: "not-a-token"}, want: http.StatusUnauthorized},
		{desc: "stats reader: pods", method: "GET", path: "/pods", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: running pods", method: "GET", path: "/runningpods/", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: container logs", method: "GET", path: logs, cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: exec", method: "POST", path: exec, cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: run", method: "POST", path: "/run/" + ns + "/shell/main?cmd=id", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: port-forward", method: "POST", path: "/portForward/" + ns + "/shell", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: configz", method: "GET", path: "/configz", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: node logs", method: "GET", path: "/logs/", cred: stats, want: http.StatusForbidden},
		{desc: "stats reader: metrics", method: "GET", path: "/metrics", cred: stats, want: http.StatusOK},
		{desc: "no role: stats", method: "GET", path: "/stats/summary", cred: nobody, want: http.StatusForbidden},
		{desc: "no role: metrics", method: "GET", path: "/metrics", cred: nobody, want: http.StatusForbidden},
		{desc: "no role: container logs", method: "GET", path: logs, cred: nobody, want: http.StatusForbidden},
		{desc: "API server: pods", method: "GET", path: "/pods", cred: master, want: http.StatusOK},
		{desc: "API server: node logs", method: "GET", path: "/logs/", cred: master, want: http.StatusOK},
		// Names that are no DNS labels or subdomains never reach the runtime.
		{desc: "escape: container ...", method: "GET", path: "/containerLogs/" + ns + "/shell/...", cred: master, want: http.StatusBadRequest},
		{desc: "escape: namespace not a DNS label", method: "GET", path: "/containerLogs/" + ns + "_x/shell/main", cred: master, want: http.StatusBadRequest},
		{desc: "escape: container ..\\etc", method: "GET", path: "/containerLogs/" + ns + "/shell/..%5cetc", cred: master, want: http.StatusBadRequest},
		// Dot segments, escaped or not, are refused (400) before the path is
		// authorized or served, whoever asks.
		{desc: "escape: container ../../etc", method: "GET", path: "/containerLogs/" + ns + "/shell/..%2f..%2fetc", cred: master, want: any4xx},
		{desc: "escape: container ../../etc/passwd", method: "GET", path: "/containerLogs/" + ns + "/shell/..%2F..%2F..%2F..%2Fetc%2Fpasswd", cred: master, want: any4xx},
		{desc: "escape: namespace ../../..", method: "GET", path: "/containerLogs/..%2f..%2f..%2f/shell/main", cred: master, want: any4xx},
		{desc: "escape: pod ../../etc", method: "GET", path: "/containerLogs/" + ns + "/..%2f..%2fetc/main", cred: master, want: any4xx},
		{desc: "escape: namespace %2e%2e", method: "GET", path: "/containerLogs/%2e%2e/shell/main", cred: master, want: any4xx},
		{desc: "escape: container ..", method: "GET", path: "/containerLogs/" + ns + "/shell/main/..", cred: master, want: any4xx},
		{desc: "escape: stats reader, /stats/../pods", method: "GET", path: "/stats/../pods", cred: stats, want: http.StatusBadRequest},
		{desc: "escape: stats reader, /stats/..%2fpods", method: "GET", path: "/stats/..%2fpods", cred: stats, want: http.StatusBadRequest},
		{desc: "escape: stats reader, /metrics/../containerLogs", method: "GET", path: "/metrics/.." + logs, cred: stats, want: http.StatusBadRequest},
		{desc: "escape: /logs/../etc/passwd", method: "GET", path: "/logs/../etc/passwd", cred: master, want: any4xx},
		{desc: "escape: /logs/..%2fetc%2fpasswd", method: "GET", path: "/logs/..%2f..%2fetc%2fpasswd", cred: master, want: any4xx},
		{desc: "escape: /logs/%2e%2e/etc/passwd", method: "GET", path: "/logs/%2e%2e/%2e%2e/etc/passwd", cred: master, want: any4xx},
	}
}
