// Command staticpoduid prints, as JSON {"<source> <pod name>": "<UID>"}, the
// UIDs upstream's kubelet (this module's k8s.io/kubernetes) gives the static
// pods of each source: a manifest file or directory, or an http(s) URL. It
// runs upstream's own pod sources (pkg/kubelet/config), as the kubelet's
// makePodSourceConfig wires them, for the node named by the first argument:
//
//	go run ./staticpoduid NODE SOURCE...
//
// The product's golden test (internal/kubelet/podsource/core) compares its
// UIDs with these. It lives in this throwaway module because it imports
// k8s.io/kubernetes, which the product never does.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: staticpoduid NODE SOURCE...")
		os.Exit(2)
	}
	// As the kubelet's RunKubelet: privileged containers are allowed.
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})
	node := types.NodeName(os.Args[1])
	out := map[string]string{}
	for _, src := range os.Args[2:] {
		uids, err := uidsOf(node, src)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", src, err)
			os.Exit(1)
		}
		for name, uid := range uids {
			out[src+" "+name] = uid
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// uidsOf runs one upstream source until it reports its pods.
func uidsOf(node types.NodeName, src string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logger := klog.Background()
	cfg := config.NewPodConfig(record.NewFakeRecorder(100), nil)
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		config.NewSourceURL(logger, src, http.Header{}, node, time.Second, cfg.Channel(ctx, kubetypes.HTTPSource))
	} else {
		config.NewSourceFile(logger, src, node, time.Second, cfg.Channel(ctx, kubetypes.FileSource))
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no pods reported: %w", ctx.Err())
		case u := <-cfg.Updates():
			if len(u.Pods) == 0 {
				continue
			}
			out := map[string]string{}
			for _, p := range u.Pods {
				out[p.Name] = string(p.UID)
			}
			return out, nil
		}
	}
}
