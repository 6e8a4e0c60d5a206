package kubeletconfig

import (
	"os"
	"testing"
)

// FuzzDecodeKubeletConfig: any file content either decodes (and then gets
// its defaults and a validation verdict) or is an error; never a panic.
func FuzzDecodeKubeletConfig(f *testing.F) {
	if sample, err := os.ReadFile("../../../configs/kubelet-config.yaml"); err == nil {
		f.Add(sample)
	}
	for _, seed := range []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\nevictionHard: {memory.available: \"x\"}\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: 1h\nsystemReserved: {cpu: 100m}\n",
		"{\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\",\"kind\":\"KubeletConfiguration\",\"port\":70000}",
		"kind: Pod\n", "a: [", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Decode(data)
		if err != nil {
			return
		}
		SetDefaults(cfg)
		_ = Validate(cfg)
	})
}
