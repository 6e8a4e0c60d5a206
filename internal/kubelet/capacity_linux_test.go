package kubelet

import "testing"

func TestParseMemTotal(t *testing.T) {
	t.Parallel()
	if got, ok := parseMemTotal([]byte("MemFree: 1 kB\nMemTotal:       16314964 kB\n")); !ok || got != 16314964*1024 {
		t.Errorf("parseMemTotal = %d %v", got, ok)
	}
	if _, ok := parseMemTotal([]byte("nothing")); ok {
		t.Error("parsed garbage")
	}
}
