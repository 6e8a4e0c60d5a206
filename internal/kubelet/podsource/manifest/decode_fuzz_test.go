package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeManifest: any manifest content gives pods or an error, never a
// panic, and every decoded pod is bound to the node with a UID and a name.
func FuzzDecodeManifest(f *testing.F) {
	samples, _ := filepath.Glob("../../../configs/manifests/*.yaml")
	for _, p := range samples {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, seed := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox}]}\n",
		"apiVersion: v1\nkind: PodList\nitems: [{metadata: {name: a}, spec: {containers: [{name: c, image: i}]}}]\n",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\",\"namespace\":\"../y\"}}",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: \"a b\"}\n", "kind: [", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := Decode(data, "/etc/kubernetes/manifests/fuzz.yaml", "node-1", Options{})
		if err != nil {
			return
		}
		for _, p := range pods {
			if p.UID == "" || p.Name == "" || p.Spec.NodeName != "node-1" {
				t.Fatalf("decoded pod without UID, name or node: %+v", p.ObjectMeta)
			}
		}
	})
}
