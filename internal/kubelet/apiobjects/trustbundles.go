package apiobjects

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// trustBundleSyncTimeout bounds the wait for the ClusterTrustBundle
// informer's first list at a projection's first use.
const trustBundleSyncTimeout = 30 * time.Second

// maxLabelSelectorLength is upstream's bound on a projection's label selector
// (as a string).
const maxLabelSelectorLength = 100 * 1024

// trustBundleSeed orders the trust anchors of a projection: stable while this
// process runs, different after a restart (upstream shuffles them once per
// cache fill, so that nobody comes to rely on an order).
var trustBundleSeed = func() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}()

// trustBundleLister starts the ClusterTrustBundle (certificates.k8s.io/v1)
// informer at the first clusterTrustBundle projection, as upstream's kubelet
// does (a node whose pods project none never watches them), and waits for
// its first list.
func (o *Objects) trustBundleLister(ctx context.Context) (certlisters.ClusterTrustBundleLister, error) {
	o.runMu.Lock()
	runCtx := o.runCtx
	o.runMu.Unlock()
	if runCtx == nil {
		return nil, errors.New("the API object informers are not running")
	}
	ctbs := o.factory.Certificates().V1().ClusterTrustBundles()
	informer := ctbs.Informer()
	o.factory.StartWithContext(runCtx) // starts only informers not started yet
	ctx, cancel := context.WithTimeout(ctx, trustBundleSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, errors.New("the ClusterTrustBundle informer has not synced yet")
	}
	return ctbs.Lister(), nil
}

// TrustAnchorsByName returns the certificates of ClusterTrustBundle name,
// deduplicated and PEM-encoded (upstream's GetTrustAnchorsByName). A missing
// bundle gives an empty file when allowMissing (an optional projection).
func (o *Objects) TrustAnchorsByName(ctx context.Context, name string, allowMissing bool) ([]byte, error) {
	lister, err := o.trustBundleLister(ctx)
	if err != nil {
		return nil, err
	}
	ctb, err := lister.Get(name)
	if apierrors.IsNotFound(err) && allowMissing {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
	}
	return normalizeTrustAnchors([]*certificatesv1.ClusterTrustBundle{ctb}), nil
}

// TrustAnchorsBySigner returns the certificates of the ClusterTrustBundles of
// signerName that selector selects (nil selects none, empty all), deduplicated
// and PEM-encoded (upstream's GetTrustAnchorsBySigner). None selected is an
// error unless allowMissing.
func (o *Objects) TrustAnchorsBySigner(ctx context.Context, signerName string, selector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("while parsing label selector: %w", err)
	}
	if n := len(sel.String()); n > maxLabelSelectorLength {
		return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxLabelSelectorLength)
	}
	lister, err := o.trustBundleLister(ctx)
	if err != nil {
		return nil, err
	}
	all, err := lister.List(sel)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", selector, err)
	}
	var ctbs []*certificatesv1.ClusterTrustBundle
	for _, ctb := range all {
		if ctb.Spec.SignerName == signerName {
			ctbs = append(ctbs, ctb)
		}
	}
	if len(ctbs) == 0 {
		if allowMissing {
			return []byte{}, nil
		}
		return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
	}
	return normalizeTrustAnchors(ctbs), nil
}

// normalizeTrustAnchors decodes every PEM block of the bundles, drops
// duplicates and encodes them again as CERTIFICATE blocks, ordered by a hash
// keyed with trustBundleSeed.
func normalizeTrustAnchors(ctbs []*certificatesv1.ClusterTrustBundle) []byte {
	type anchor struct {
		der, key []byte
	}
	var anchors []anchor
	seen := map[string]bool{}
	for _, ctb := range ctbs {
		rest := []byte(ctb.Spec.TrustBundle)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if seen[string(b.Bytes)] {
				continue
			}
			seen[string(b.Bytes)] = true
			key := sha256.Sum256(append(slices.Clone(trustBundleSeed), b.Bytes...))
			anchors = append(anchors, anchor{der: b.Bytes, key: key[:]})
		}
	}
	slices.SortFunc(anchors, func(a, b anchor) int { return bytes.Compare(a.key, b.key) })
	var out []byte
	for _, a := range anchors {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.der})...)
	}
	if out == nil {
		out = []byte{}
	}
	return out
}
