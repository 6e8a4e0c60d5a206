package cmdtest

import "testing"

func TestSuffixAndSummarize(t *testing.T) {
	if a, b := Suffix(t), Suffix(t); len(a) != 8 || a == b {
		t.Errorf("suffixes %q and %q: want 8 hex digits, different", a, b)
	}
	if got := Summarize([]string{"a", "b", "c"}, 2); got != "a b ..." {
		t.Errorf("Summarize = %q", got)
	}
	if got := Summarize([]string{"a", "b"}, 2); got != "a b" {
		t.Errorf("Summarize = %q", got)
	}
}
