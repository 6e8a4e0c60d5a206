package installtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// The files of a kubeadm node that runs upstream's kubelet v1.37 and
// cri-dockerd from their packages, with the systemd cgroup driver, for the
// node container of TestIntegrationInstallOnKubeadmNodeContainer. Both
// binaries are stand-ins that only run (nodeUpstreamKubelet,
// nodeCRIDockerd): upstream's kubelet does not start in a node container
// (with the systemd driver it validates kubepods.slice at the root of each
// hierarchy, e.g. /sys/fs/cgroup/systemd/kubepods.slice, while systemd makes
// it below its own cgroup: that needs a cgroup namespace, and node
// containers share the host's).
const (
	// nodeConfigYAML is /var/lib/kubelet/config.yaml as `kubeadm init` and
	// `kubeadm join` write it (a KubeletConfiguration with every field
	// kubeadm sets, zero durations included). The node is cgroup v1, where
	// upstream's kubelet 1.35+ starts only with failCgroupV1: false: set in
	// the cluster's KubeletConfiguration, kubeadm writes it here.
	nodeConfigYAML = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
failCgroupV1: false
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`
	// nodeDefaultKubelet is the operator's /etc/default/kubelet: the
	// read-only port lets the test read /pods from both kubelets (kubeadm's
	// config leaves the kubelet's API to authenticated callers only).
	nodeDefaultKubelet = "KUBELET_EXTRA_ARGS=--read-only-port=10255\n"

	// nodeUpstreamKubelet stands in for upstream's /usr/bin/kubelet: it
	// runs until stopped.
	nodeUpstreamKubelet = upstreamKubelet + "exec sleep infinity\n"
	// nodeCRIDockerd stands in for /usr/bin/cri-dockerd.
	nodeCRIDockerd = "#!/bin/sh\nexec sleep infinity\n"
	// cri-dockerd's units as its packages install them: socket-activated on
	// /run/cri-dockerd.sock (kubeadm names it /var/run/cri-dockerd.sock);
	// Type=simple, as the stand-in does not notify.
	nodeCRIDockerService = `[Unit]
Description=CRI Interface for Docker Application Container Engine
After=network-online.target docker.service cri-docker.socket
Wants=network-online.target
Requires=cri-docker.socket

[Service]
Type=simple
ExecStart=/usr/bin/cri-dockerd --container-runtime-endpoint fd://
ExecReload=/bin/kill -s HUP $MAINPID
TimeoutSec=0
RestartSec=2
Restart=always
LimitNOFILE=infinity
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
Delegate=yes
KillMode=process

[Install]
WantedBy=multi-user.target
`
	nodeCRIDockerSocket = `[Unit]
Description=CRI Docker Socket for the API
PartOf=cri-docker.service

[Socket]
ListenStream=%t/cri-dockerd.sock
SocketMode=0660
SocketUser=root
SocketGroup=root

[Install]
WantedBy=sockets.target
`
)

// burstablePod is a static pod of the Burstable QoS class on the host's
// network: the kubelet gives it a pod slice with a 64Mi memory limit.
func burstablePod(name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: default}
spec:
  hostNetwork: true
  containers:
  - name: main
    image: kubelet-dockershim/busybox:latest
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 64Mi}}
`
}

// nodePKI returns the files of a joined kubeadm node's credentials: the
// cluster CA (/etc/kubernetes/pki/ca.crt, the kubelet's clientCAFile), the
// node's client certificate and key where the kubelet rotates them
// (/var/lib/kubelet/pki/kubelet-client-current.pem) and
// /etc/kubernetes/kubelet.conf naming them, as kubeadm leaves it after
// `kubeadm init`'s kubelet-finalize phase. Its server, 127.0.0.1:6443,
// does not answer: the node is one whose API server is down, so the pods
// are static ones, which the kubelet must run anyway (as on a control-plane
// node before its API server's static pod is up).
func nodePKI(t *testing.T, nodeName string) map[string]string {
	t.Helper()
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey := newKey(t)
	nodeTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, ca, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	pair := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: nodeDER})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	user := "system:node:" + nodeName
	kubeconfig := strings.NewReplacer("@CA@", base64.StdEncoding.EncodeToString([]byte(caPEM)), "@USER@", user).Replace(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: @CA@
    server: https://127.0.0.1:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: @USER@
  name: @USER@@kubernetes
current-context: @USER@@kubernetes
preferences: {}
users:
- name: @USER@
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
`)
	return map[string]string{
		"/etc/kubernetes/pki/ca.crt":                      caPEM,
		"/var/lib/kubelet/pki/kubelet-client-current.pem": pair,
		"/etc/kubernetes/kubelet.conf":                    kubeconfig,
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
