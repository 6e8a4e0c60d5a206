//go:build linux

package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIntegrationStartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("default service account: %v", err)
	}
	out, err := c.KubectlRun(ctx, "", "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"gitVersion": "v1.37.1"`) {
		t.Errorf("kubectl version: %s", out)
	}
	if err := c.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
