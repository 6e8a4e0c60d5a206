package app

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

func TestRunFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"version", []string{"--version"}, "", "Kubernetes v1."},
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag: --no-such-flag", ""},
		{"bad duration", []string{"--runtime-request-timeout=soon"}, "--runtime-request-timeout", ""},
		{"bad runtime", []string{"--container-runtime=rkt"}, "allowed: docker, remote", ""},
		{"kubenet", []string{"--network-plugin=kubenet", "--experimental-dockershim"}, "kubenet is not supported", ""},
		{"positional", []string{"extra"}, "unknown command", ""},
		{"vmodule with json", []string{"--logging-format=json", "--vmodule=worker=4"}, "logging.vmodule: Forbidden: Only supported for text log format", ""},
		{"split stream without its gate", []string{"--log-text-split-stream"}, "logging.options.text.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Run(ctx, tc.args, &out, &errOut)
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(out.String(), tc.wantOut) {
					t.Fatalf("Run = %v, out %q", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Run = %v, want one line containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc         string
		mod          func(*Config)
		initial, max time.Duration
	}{
		{"defaults", func(*Config) {}, 10 * time.Second, 300 * time.Second},
		{"maxContainerRestartPeriod", func(c *Config) {
			c.Kubelet.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 5 * time.Second}
		}, 5 * time.Second, 5 * time.Second},
		{"gate off", func(c *Config) {
			c.Kubelet.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 30 * time.Second}
			c.Kubelet.FeatureGates = map[string]bool{"KubeletCrashLoopBackOffMax": false}
		}, 10 * time.Second, 300 * time.Second},
		{"reduced decay", func(c *Config) {
			c.Kubelet.FeatureGates = map[string]bool{"ReduceDefaultCrashLoopBackOffDecay": true}
		}, time.Second, 60 * time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := Config{Config: options.DefaultConfig()}
			tc.mod(&c)
			b := crashLoopBackOff(&c)
			now := b.Clock.Now()
			b.Next("c", now)
			if got := b.Get("c"); got != tc.initial {
				t.Errorf("initial %v, want %v", got, tc.initial)
			}
			for range 20 {
				b.Next("c", now)
			}
			if got := b.Get("c"); got != tc.max {
				t.Errorf("max %v, want %v", got, tc.max)
			}
		})
	}
}

// TestLoggingOptions: the logger gets vmodule and the format's own split
// stream and info buffer.
func TestLoggingOptions(t *testing.T) {
	t.Parallel()
	c := options.DefaultConfig().Kubelet.Logging
	c.VModule = logsapi.VModuleConfiguration{{FilePattern: "worker*", Verbosity: 5}}
	c.Options.Text.SplitStream = true
	c.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("1Ki")}
	o := loggingOptions(&c, 2)
	if o.Verbosity != 2 || o.Format != "text" || len(o.VModule) != 1 || o.VModule[0] != (logging.VModule{Pattern: "worker*", Level: 5}) ||
		!o.SplitStream || o.InfoBufferSize != 0 {
		t.Errorf("text: %+v", o)
	}
	c.Format = "json"
	if o := loggingOptions(&c, 0); o.SplitStream || o.InfoBufferSize != 1024 {
		t.Errorf("json: %+v, want the JSON options (no split stream, a 1Ki buffer)", o)
	}
}
