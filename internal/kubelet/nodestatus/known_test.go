package nodestatus

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FreshNode reads through the fetch function, keeps what it read as the
// known node, and fails without one.
func TestKnownFreshNode(t *testing.T) {
	t.Parallel()
	k := NewKnown()
	if _, err := k.FreshNode(context.Background()); err == nil {
		t.Fatal("FreshNode without a fetch function: no error")
	}
	k.store(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1"}})
	served := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "2", Labels: map[string]string{"node": "n"}}}
	var fail error
	k.SetFetch(func(context.Context) (*v1.Node, error) { return served, fail })
	got, err := k.FreshNode(context.Background())
	if err != nil || got.Labels["node"] != "n" {
		t.Fatalf("FreshNode = %v, %v", got, err)
	}
	got.Labels["node"] = "changed by the caller"
	if known, _ := k.Node(); known.ResourceVersion != "2" || known.Labels["node"] != "n" {
		t.Errorf("known node after FreshNode: %+v", known.ObjectMeta)
	}
	fail = errors.New("away")
	if _, err := k.FreshNode(context.Background()); err == nil {
		t.Error("a failed read: no error")
	}
	if known, _ := k.Node(); known.ResourceVersion != "2" {
		t.Errorf("a failed read changed the known node: %+v", known.ObjectMeta)
	}
}
