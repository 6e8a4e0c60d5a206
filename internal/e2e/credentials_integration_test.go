//go:build linux

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/registry"
)

// TestIntegrationNodeCredentials: images on a password-protected registry
// are pulled with the node's own credentials, as upstream's kubelet finds
// them: a credential provider plugin (--image-credential-provider-config and
// -bin-dir, the exec protocol credentialprovider.kubelet.k8s.io/v1; a small
// script of this test answers for the registry as 127.0.0.1:<port>) and the
// Docker config file in the root dir (config.json, for the same registry as
// localhost:<port>). No pod has a pull secret; pulls are Always.
func TestIntegrationNodeCredentials(t *testing.T) {
	const user, pass = "nodecreds", "s3cret"
	n := newNode(t)
	reg := registry.Start(t, user, pass)
	_, port, _ := strings.Cut(reg, ":")
	image := pushPrivateBusybox(t, n, reg, user, pass)
	t.Cleanup(func() {
		_ = exec.Command("docker", "-H", n.s.docker, "rmi", "localhost:"+port+"/private/busybox:1").Run()
	})

	providers, bin := writeCredentialProvider(t, n.dir, "test-provider", "cat >/dev/null", port, user, pass, "")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	if err := os.WriteFile(filepath.Join(n.rootDir, "config.json"),
		[]byte(`{"auths":{"localhost:`+port+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n.extra = append(n.extra, "--image-credential-provider-config="+providers, "--image-credential-provider-bin-dir="+bin)
	n.start()
	pod := func(name, image string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: @NS@
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: Always
    command: ["sleep", "3600"]
`, name, image)
	}
	n.writeManifest("plugin.yaml", pod("plugin", image))
	n.writeManifest("dockercfg.yaml", pod("dockercfg", "localhost:"+port+"/private/busybox:1"))
	for _, name := range []string{"plugin", "dockercfg"} {
		n.waitPod(name, podStartTimeout, "running with an image pulled with the node's credentials", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodRunning
		})
	}
}

// pushPrivateBusybox pushes busybox to the password-protected registry reg as
// reg/private/busybox:1, logged in with a docker CLI config of the test's
// own, and removes the local tag (the image and the tag are removed at the
// test's end too). It returns the image.
func pushPrivateBusybox(t *testing.T, n *node, reg, user, pass string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := t.TempDir()
	image := reg + "/private/busybox:1"
	for _, args := range [][]string{{"login", "-u", user, "--password-stdin", reg}, {"tag", busyboxImage, image}, {"push", image}, {"rmi", image}} {
		cmd := exec.CommandContext(ctx, "docker", append([]string{"-H", n.s.docker}, args...)...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cli)
		if args[0] == "login" {
			cmd.Stdin = strings.NewReader(pass)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("docker", "-H", n.s.docker, "rmi", image).Run() })
	return image
}

// writeCredentialProvider writes a credential provider plugin, name, into a
// bin directory under dir: a script that runs first, then answers the
// registry 127.0.0.1:port with user and pass (cacheKeyType Registry); and a
// CredentialProviderConfig with that provider for the registry, extra
// appended to its entry. It returns the config's path and the bin directory.
func writeCredentialProvider(t *testing.T, dir, name, first, port, user, pass, extra string) (config, bin string) {
	t.Helper()
	bin = filepath.Join(dir, "credbin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := fmt.Sprintf(`#!/bin/sh
%s
echo '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","auth":{"127.0.0.1:%s":{"username":"%s","password":"%s"}}}'
`, first, port, user, pass)
	if err := os.WriteFile(filepath.Join(bin, name), []byte(plugin), 0o755); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "credential-providers.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: `+name+`
  matchImages: ["127.0.0.1:`+port+`"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return config, bin
}
