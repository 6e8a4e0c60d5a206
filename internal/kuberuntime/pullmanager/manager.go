package pullmanager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeWhileMatchingLimit bounds the secrets a credential mapping gains
// from MustAttemptImagePull's matches, as upstream (100).
const writeWhileMatchingLimit = 100

// Image is what the manager needs of an image on the node at start.
type Image struct {
	ID                    string
	RepoTags, RepoDigests []string
}

// ImageLister lists the runtime's images (recovering the intents of pulls
// the last kubelet did not see finish).
type ImageLister interface {
	ListImages(ctx context.Context) ([]Image, error)
}

// PodCredentials returns the pod's pull secrets (with their credential
// hashes) and its service account, when credential providers used one.
type PodCredentials func() ([]Secret, *ServiceAccount, error)

// Options builds a Manager.
type Options struct {
	// RootDirectory is the kubelet's root directory. Required.
	RootDirectory string
	// Policy is imagePullCredentialsVerificationPolicy's. Required.
	Policy Policy
	// Images lists the runtime's images at start; nil: intents left by a
	// previous kubelet stay until their images are pulled again.
	Images ImageLister
	// MaxPods and MaxParallelPulls size the in-memory caches as upstream:
	// 5 * maxPods records, max(2 * maxPods, 2 * maxParallelImagePulls)
	// intents (the usage gauges' 100 %).
	MaxPods, MaxParallelPulls int
	// Metrics receives the kubelet_imagemanager_* series; nil: none.
	Metrics *Metrics
	Logger  *zap.Logger
}

// Manager records image pulls and answers MustAttemptImagePull. Its methods
// are safe for concurrent use; file operations are serialised by one mutex
// (each is a small read or write; no caller's slow work runs under it).
type Manager struct {
	store   *store
	policy  Policy
	metrics *Metrics
	logger  *zap.Logger

	// Only this process writes the files, so what it knows of them in
	// memory is authoritative: a container start with a present image reads
	// no file once its record (or the lack of one) is known.
	mu          sync.Mutex
	inFlight    map[string]int     // image -> pulls in flight (intents written)
	leftIntents map[string]bool    // intents a previous kubelet left, image absent
	cache       map[string]*Record // imageRef -> record, at most cacheSize
	absent      map[string]bool    // imageRefs without a record, at most cacheSize
	cacheSize   int
	intentSize  int // the intents gauge's 100 %
	nIntents    int // files in pulling/
	nRecords    int // files in pulled/
}

// New opens the records under opts.RootDirectory (v1alpha1 files rewritten
// as v1beta1) and turns the intents whose images are now present into
// records: the pull finished while no kubelet was there to see it.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.RootDirectory == "" || opts.Policy == nil {
		return nil, fmt.Errorf("pullmanager: RootDirectory and Policy are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = 110
	}
	s, err := newStore(opts.RootDirectory)
	if err != nil {
		return nil, err
	}
	m := &Manager{store: s, policy: opts.Policy, metrics: opts.Metrics, logger: opts.Logger,
		inFlight: map[string]int{}, leftIntents: map[string]bool{}, cache: map[string]*Record{}, absent: map[string]bool{},
		cacheSize: 5 * opts.MaxPods, intentSize: max(2*opts.MaxPods, 2*opts.MaxParallelPulls)}
	if err := s.migrate(); err != nil {
		m.logger.Error("Error migrating image pull records", zap.Error(err))
	}
	m.recover(ctx, opts.Images)
	m.nIntents, _ = count(s.pullingDir)
	m.nRecords, _ = count(s.pulledDir)
	m.updateGaugesLocked() // not shared yet
	return m, nil
}

// recover writes a record (with no credentials: whoever pulled must verify)
// for each intent whose image the runtime has, by tag or digest, and drops
// the intent.
func (m *Manager) recover(ctx context.Context, lister ImageLister) {
	intents, err := m.store.intents()
	if err != nil {
		m.logger.Error("There were errors listing ImagePullIntents, continuing with an incomplete records list", zap.Error(err))
	}
	for _, i := range intents {
		m.leftIntents[i] = true
	}
	if len(intents) == 0 || lister == nil {
		return
	}
	images, err := lister.ListImages(ctx)
	if err != nil {
		m.logger.Error("Failed to list images", zap.Error(err))
		return
	}
	pending := map[string]bool{}
	for _, i := range intents {
		pending[i] = true
	}
	for _, img := range images {
		for _, name := range slices.Concat(img.RepoDigests, img.RepoTags) {
			if !pending[name] {
				continue
			}
			if err := m.writeIfChanged(name, img.ID, nil); err != nil {
				m.logger.Error("Failed to write an image pull record", zap.String("imageRef", img.ID), zap.Error(err))
				continue
			}
			if err := m.store.deleteIntent(name); err != nil {
				m.logger.Debug("Failed to remove image pull intent file", zap.String("image", name), zap.Error(err))
			} else {
				delete(m.leftIntents, name)
			}
			delete(pending, name)
		}
	}
}

// RecordPullIntent writes the intent of pulling image (the pod's image
// string) before the pull starts.
func (m *Manager) RecordPullIntent(image string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.store.writeIntent(image); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	if m.inFlight[image] == 0 && !m.leftIntents[image] {
		m.nIntents++
	}
	delete(m.leftIntents, image)
	m.inFlight[image]++
	m.updateGaugesLocked()
	return nil
}

// RecordImagePulled merges the credentials of a successful pull into the
// record of imageRef and ends the intent. creds nil: pulled with no
// credentials or the node's (every pod on the node may use it).
func (m *Manager) RecordImagePulled(image, imageRef string, creds *Credentials) {
	if creds == nil {
		creds = &Credentials{NodePodsAccessible: true}
	}
	if err := m.writeIfChanged(image, imageRef, creds); err != nil {
		m.logger.Error("Failed to write image pulled record", zap.String("imageRef", imageRef), zap.Error(err))
		return
	}
	m.endIntent(image)
}

// RecordImagePullFailed ends the intent of a pull that failed.
func (m *Manager) RecordImagePullFailed(image string) { m.endIntent(image) }

// endIntent removes image's intent file when its last pull in flight ends.
func (m *Manager) endIntent(image string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inFlight[image] <= 1 {
		if err := m.store.deleteIntent(image); err != nil {
			m.logger.Error("Failed to remove image pull intent", zap.String("image", image), zap.Error(err))
			return
		}
		if m.inFlight[image] > 0 {
			m.nIntents--
		}
		delete(m.inFlight, image)
		m.updateGaugesLocked()
		return
	}
	m.inFlight[image]--
}

// MustAttemptImagePull says whether a pod must pull image (its spec's
// string), present on the node as imageRef, to prove it may use it:
//  1. the policy lets it use the image (NeverVerify, a preloaded image, an
//     allowlisted one): no;
//  2. no record of the image, or none for this image name: yes;
//  3. pulled with no credentials or the node's: no;
//  4. a pod secret with the same credentials (hash) as one that pulled it,
//     or the same secret (coordinates) since rotated: no, and the record
//     learns the pod's secret;
//  5. the pod's service account pulled it through a credential provider: no;
//  6. otherwise yes.
//
// A record that cannot be read means yes (the pull verifies); an error of
// creds is returned.
func (m *Manager) MustAttemptImagePull(image, imageRef string, creds PodCredentials) (must bool, err error) {
	if imageRef == "" {
		return true, nil
	}
	result := checkError
	defer func() { m.metrics.mustPullCheck(result) }()

	m.mu.Lock()
	record, err := m.recordLocked(imageRef)
	pulledByKubelet := record != nil || m.inFlight[image] > 0 || m.leftIntents[image]
	m.mu.Unlock()
	if err != nil {
		m.logger.Error("Unable to access cache records about image pulls", zap.Error(err))
		return true, nil
	}
	if !m.policy(image, pulledByKubelet) {
		result = checkPolicyAllowed
		return false, nil
	}
	if record == nil {
		result = checkMustAuthenticate
		return true, nil
	}
	name, err := TrimTagDigest(image)
	if err != nil {
		m.logger.Error("Failed to parse image name, forcing image credentials reverification", zap.String("image", image), zap.Error(err))
		return true, nil
	}
	cached, ok := record.CredentialMapping[name]
	switch {
	case !ok:
		result = checkMustAuthenticate
		return true, nil
	case cached.NodePodsAccessible:
		result = checkRecordFound
		return false, nil
	case len(cached.KubernetesSecrets) == 0 && len(cached.KubernetesServiceAccounts) == 0:
		result = checkMustAuthenticate
		return true, nil
	}
	secrets, account, err := creds()
	if err != nil {
		return true, err
	}
	for _, mine := range secrets {
		for _, theirs := range cached.KubernetesSecrets {
			sameHash := theirs.CredentialHash != "" && mine.CredentialHash == theirs.CredentialHash
			sameSecret := mine.UID == theirs.UID && mine.Namespace == theirs.Namespace && mine.Name == theirs.Name
			underLimit := len(cached.KubernetesSecrets) < writeWhileMatchingLimit
			// The same secret with other credentials (rotated) counts only
			// while the record may still learn it, as upstream.
			if !sameHash && (!sameSecret || !underLimit) {
				continue
			}
			if !(sameHash && sameSecret) && underLimit {
				if err := m.writeIfChanged(image, imageRef, &Credentials{KubernetesSecrets: []Secret{mine}}); err != nil {
					m.logger.Error("Failed to write an image pulled record", zap.String("image", image), zap.String("imageRef", imageRef), zap.Error(err))
				}
			}
			result = checkRecordFound
			return false, nil
		}
	}
	if account != nil && slices.Contains(cached.KubernetesServiceAccounts, *account) {
		result = checkRecordFound
		return false, nil
	}
	result = checkMustAuthenticate
	return true, nil
}

// PruneUnknownRecords removes the records last updated before until whose
// images are not in inUse (the image IDs left after image GC): the image GC's
// hook, as upstream.
func (m *Manager) PruneUnknownRecords(inUse []string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	records, err := m.store.records()
	if err != nil {
		m.logger.Error("There were errors listing ImagePulledRecords, garbage collection will proceed with incomplete records list", zap.Error(err))
	}
	for _, r := range records {
		if !r.LastUpdatedTime.Time.Before(until) || slices.Contains(inUse, r.ImageRef) {
			continue
		}
		if err := m.store.deleteRecord(r.ImageRef); err != nil {
			m.logger.Error("Failed to remove an ImagePulledRecord", zap.String("imageRef", r.ImageRef), zap.Error(err))
			continue
		}
		delete(m.cache, r.ImageRef)
		m.absent[r.ImageRef] = true
	}
	m.nRecords, _ = count(m.store.pulledDir)
	m.updateGaugesLocked()
}

// writeIfChanged merges creds (nil: none) for image's name into imageRef's
// record and writes it when it changed.
func (m *Manager) writeIfChanged(image, imageRef string, creds *Credentials) error {
	name, err := TrimTagDigest(image)
	if err != nil {
		return fmt.Errorf("invalid image name %q: %w", image, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	record, err := m.recordLocked(imageRef)
	if err != nil {
		m.logger.Info("Failed to retrieve an ImagePulledRecord", zap.String("image", image), zap.Error(err))
		record = nil
	}
	next, changed := merge(record, imageRef, name, creds)
	if !changed {
		return nil
	}
	if err := m.store.writeRecord(next); err != nil {
		delete(m.cache, imageRef)
		delete(m.absent, imageRef)
		return err
	}
	if record == nil {
		m.nRecords++
	}
	m.remember(next)
	m.updateGaugesLocked()
	return nil
}

// recordLocked reads imageRef's record through the cache (of records and
// of their absence).
func (m *Manager) recordLocked(imageRef string) (*Record, error) {
	if r, ok := m.cache[imageRef]; ok {
		return r, nil
	}
	if m.absent[imageRef] {
		return nil, nil
	}
	r, err := m.store.record(imageRef)
	switch {
	case err != nil:
	case r != nil:
		m.remember(r)
	default:
		if len(m.absent) >= m.cacheSize {
			clear(m.absent)
		}
		m.absent[imageRef] = true
	}
	return r, err
}

// remember caches r, making room by dropping an arbitrary entry.
func (m *Manager) remember(r *Record) {
	if _, ok := m.cache[r.ImageRef]; !ok && len(m.cache) >= m.cacheSize {
		for k := range m.cache {
			delete(m.cache, k)
			break
		}
	}
	m.cache[r.ImageRef] = r
	delete(m.absent, r.ImageRef)
}

// merge returns the record with creds added for name (a new record when
// orig is nil) and whether anything changed. Records are never modified in
// place: the cache may hold them.
//   - node-wide access (no credentials, or the node's) replaces any secrets
//     and service accounts and is kept;
//   - secrets are merged by coordinates (a new hash replaces the old one),
//     service accounts by value, each list sorted by namespace, name, UID.
func merge(orig *Record, imageRef, name string, creds *Credentials) (*Record, bool) {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	if orig == nil {
		r := &Record{LastUpdatedTime: now, ImageRef: imageRef, CredentialMapping: map[string]Credentials{}}
		if creds != nil {
			r.CredentialMapping[name] = *creds
		}
		return r, true
	}
	if creds == nil || (!creds.NodePodsAccessible && len(creds.KubernetesSecrets) == 0 && len(creds.KubernetesServiceAccounts) == 0) {
		return orig, false
	}
	cur, found := orig.CredentialMapping[name]
	switch {
	case !found:
		cur = *creds
	case cur.NodePodsAccessible:
		return orig, false
	case creds.NodePodsAccessible:
		cur = Credentials{NodePodsAccessible: true}
	case len(creds.KubernetesSecrets) > 0:
		var changed bool
		if cur.KubernetesSecrets, changed = mergeSecrets(cur.KubernetesSecrets, creds.KubernetesSecrets); !changed {
			return orig, false
		}
	default:
		var changed bool
		if cur.KubernetesServiceAccounts, changed = mergeAccounts(cur.KubernetesServiceAccounts, creds.KubernetesServiceAccounts); !changed {
			return orig, false
		}
	}
	r := orig.DeepCopy()
	if r.CredentialMapping == nil {
		r.CredentialMapping = map[string]Credentials{}
	}
	r.CredentialMapping[name] = cur
	r.LastUpdatedTime = now
	return r, true
}

func mergeSecrets(orig, add []Secret) ([]Secret, bool) {
	type coords struct{ uid, ns, name string }
	hashes := map[coords]string{}
	for _, s := range orig {
		hashes[coords{s.UID, s.Namespace, s.Name}] = s.CredentialHash
	}
	changed := false
	for _, s := range add {
		k := coords{s.UID, s.Namespace, s.Name}
		if h, ok := hashes[k]; !ok || h != s.CredentialHash {
			hashes[k], changed = s.CredentialHash, true
		}
	}
	if !changed {
		return orig, false
	}
	out := make([]Secret, 0, len(hashes))
	for k, h := range hashes {
		out = append(out, Secret{UID: k.uid, Namespace: k.ns, Name: k.name, CredentialHash: h})
	}
	slices.SortFunc(out, func(a, b Secret) int {
		return compareCoords(a.Namespace, a.Name, a.UID, b.Namespace, b.Name, b.UID)
	})
	return out, true
}

func mergeAccounts(orig, add []ServiceAccount) ([]ServiceAccount, bool) {
	out := slices.Clone(orig)
	changed := false
	for _, a := range add {
		if !slices.Contains(out, a) {
			out, changed = append(out, a), true
		}
	}
	if !changed {
		return orig, false
	}
	slices.SortFunc(out, func(a, b ServiceAccount) int {
		return compareCoords(a.Namespace, a.Name, a.UID, b.Namespace, b.Name, b.UID)
	})
	return out, true
}

func compareCoords(ns1, name1, uid1, ns2, name2, uid2 string) int {
	if c := strings.Compare(ns1, ns2); c != 0 {
		return c
	}
	if c := strings.Compare(name1, name2); c != 0 {
		return c
	}
	return strings.Compare(uid1, uid2)
}

// updateGaugesLocked sets the in-memory and on-disk gauges.
func (m *Manager) updateGaugesLocked() {
	if m.metrics == nil {
		return
	}
	m.metrics.inMemRecords.Set(100 * float64(len(m.cache)) / float64(m.cacheSize))
	m.metrics.inMemIntents.Set(100 * float64(len(m.inFlight)) / float64(m.intentSize))
	m.metrics.diskIntents.Set(float64(m.nIntents))
	m.metrics.diskRecords.Set(float64(m.nRecords))
}
