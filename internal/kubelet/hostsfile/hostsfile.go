// Package hostsfile writes the kubelet-managed /etc/hosts of a pod: the localhost
// lines, one line per pod IP naming the pod's hostname (and FQDN when the pod has a
// subdomain), and the pod's hostAliases; for host-network pods, a copy of the node's
// hosts file plus the hostAliases. The content matches the upstream kubelet's byte for
// byte, so tools that recognise "# Kubernetes-managed hosts file." keep working.
//
// Only the kubelet coordinator (internal/kubelet) may import it. It imports no other
// package of this project.
package hostsfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Headers of the managed file (upstream's).
const (
	ManagedHeader            = "# Kubernetes-managed hosts file.\n"
	ManagedHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	hostAliasesHeader        = "# Entries added by HostAliases.\n"
)

// NodeHostsPath is the node's hosts file that host-network pods get a copy of.
const NodeHostsPath = "/etc/hosts"

// fileMode is the mode of the written file (containers only read it).
const fileMode = 0o644

// Input is everything the hosts file is made from.
type Input struct {
	// Pod supplies spec.hostNetwork and spec.hostAliases.
	Pod *v1.Pod
	// PodIPs each get a line naming the pod (ignored for host-network pods).
	PodIPs []string
	// Hostname is the pod's short host name.
	Hostname string
	// Domain is the pod's host domain (<subdomain>.<ns>.svc.<cluster-domain>) or "".
	Domain string
	// NodeHostsPath is the node hosts file copied for host-network pods; "" means
	// NodeHostsPath (/etc/hosts).
	NodeHostsPath string
}

// Write writes the pod's managed hosts file to path (mode 0644), reading the node's
// /etc/hosts for host-network pods.
func Write(path string, pod *v1.Pod, podIPs []string, hostname, domain string) error {
	return WriteFrom(path, Input{Pod: pod, PodIPs: podIPs, Hostname: hostname, Domain: domain})
}

// WriteFrom writes the hosts file rendered from in to path. The file is rewritten in
// place (not replaced) because it is bind-mounted into running containers: a rename
// would leave them with the old inode. An unchanged file is not touched.
func WriteFrom(path string, in Input) error {
	content, err := Render(in)
	if err != nil {
		return err
	}
	if err := rewrite(path, content); err != nil {
		return fmt.Errorf("write hosts file %s: %w", path, err)
	}
	return nil
}

// rewrite makes the file at path hold content, creating it if needed. The file
// is the pod's: containers get it read-write as /etc/hosts, so its size and
// content are theirs (its inode and path are not). It is therefore compared
// only when its size is content's, never read whole (a container that filled
// it would have the kubelet read gigabytes at its next start), and it is
// opened without following a symlink and without blocking, anything but a
// regular file refused.
func rewrite(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, fileMode)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	if fi.Size() == int64(len(content)) {
		old := make([]byte, len(content))
		if _, err := io.ReadFull(f, old); err == nil && bytes.Equal(old, content) {
			return nil
		}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		return err
	}
	return f.Close()
}

// Render returns the content of the pod's hosts file.
func Render(in Input) ([]byte, error) {
	var aliases []v1.HostAlias
	hostNetwork := false
	if in.Pod != nil {
		aliases = in.Pod.Spec.HostAliases
		hostNetwork = in.Pod.Spec.HostNetwork
	}
	if hostNetwork {
		return nodeHostsContent(in.NodeHostsPath, aliases)
	}
	return managedContent(in.PodIPs, in.Hostname, in.Domain, aliases), nil
}

// nodeHostsContent is the host-network variant: header, the node's file, aliases.
func nodeHostsContent(nodeHostsPath string, aliases []v1.HostAlias) ([]byte, error) {
	if nodeHostsPath == "" {
		nodeHostsPath = NodeHostsPath
	}
	node, err := os.ReadFile(nodeHostsPath)
	if err != nil {
		return nil, fmt.Errorf("read node hosts file: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(ManagedHeaderHostNetwork)
	b.Write(node)
	writeAliases(&b, aliases)
	return b.Bytes(), nil
}

// managedContent is the pod-network variant.
func managedContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(ManagedHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	writeAliases(&b, aliases)
	return b.Bytes()
}

// writeAliases appends the HostAliases section: one line per alias entry with all of
// its host names, after a blank line and a comment.
func writeAliases(b *bytes.Buffer, aliases []v1.HostAlias) {
	if len(aliases) == 0 {
		return
	}
	b.WriteString("\n")
	b.WriteString(hostAliasesHeader)
	for _, a := range aliases {
		fmt.Fprintf(b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
}
