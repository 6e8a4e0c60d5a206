package images

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageRecord is what the Manager knows about one image.
type imageRecord struct {
	firstDetected  time.Time // the detection that first listed it
	lastUsed       time.Time // the last detection that saw a container use it; zero = never
	size           int64
	pinned         bool   // the runtime asked us never to remove it
	runtimeHandler string // Image.Spec.RuntimeHandler, passed back on removal
}

// candidate is an image that may be removed, with a copy of its record.
type candidate struct {
	id string
	imageRecord
}

// detectImages lists images and containers and refreshes the records: new
// images are first detected at detectTime, images a container uses get
// lastUsed = now, vanished images are dropped. It returns the in-use set.
// The caller holds gcSem.
func (m *Manager) detectImages(ctx context.Context, detectTime time.Time) (map[string]struct{}, error) {
	imgs, err := m.images.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	ctrs, err := m.containers.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	inUse := imagesInUse(ctrs)
	now := m.clock.Now()

	m.recordsMu.Lock()
	defer m.recordsMu.Unlock()
	present := make(map[string]struct{}, len(imgs))
	for _, img := range imgs {
		id := img.GetId()
		present[id] = struct{}{}
		r, ok := m.records[id]
		if !ok {
			m.logger.Debug("New image detected", zap.String("imageID", id), zap.Time("firstDetected", detectTime))
			r = &imageRecord{firstDetected: detectTime}
			m.records[id] = r
		}
		if _, used := inUse[id]; used {
			r.lastUsed = now
		}
		r.size = int64(img.GetSize())
		r.pinned = img.GetPinned()
		r.runtimeHandler = img.GetSpec().GetRuntimeHandler()
	}
	for id := range m.records {
		if _, ok := present[id]; !ok {
			m.logger.Debug("Image is gone; dropping its record", zap.String("imageID", id))
			delete(m.records, id)
		}
	}
	return inUse, nil
}

// imagesInUse is the set of image references of the containers: the image ID
// (ImageId, or ImageRef for runtimes that predate it), ImageRef, and the
// image the container was created from (Image.Image), which may be an ID.
func imagesInUse(ctrs []*runtimeapi.Container) map[string]struct{} {
	inUse := make(map[string]struct{}, len(ctrs))
	for _, c := range ctrs {
		for _, ref := range []string{c.GetImageId(), c.GetImageRef(), c.GetImage().GetImage()} {
			if ref != "" {
				inUse[ref] = struct{}{}
			}
		}
	}
	return inUse
}

// evictionOrder detects images and returns those that may be removed (neither
// in use nor pinned), least recently used first, ties by older firstDetected.
// The caller holds gcSem.
func (m *Manager) evictionOrder(ctx context.Context, freeTime time.Time) ([]candidate, error) {
	inUse, err := m.detectImages(ctx, freeTime)
	if err != nil {
		return nil, err
	}
	m.recordsMu.Lock()
	defer m.recordsMu.Unlock()
	out := make([]candidate, 0, len(m.records))
	for id, r := range m.records {
		if _, used := inUse[id]; used {
			m.logger.Debug("Image is in use; not a candidate", zap.String("imageID", id))
			continue
		}
		if r.pinned {
			m.logger.Debug("Image is pinned; not a candidate", zap.String("imageID", id))
			continue
		}
		out = append(out, candidate{id: id, imageRecord: *r})
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(a.lastUsed.Compare(b.lastUsed), a.firstDetected.Compare(b.firstDetected), cmp.Compare(a.id, b.id))
	})
	return out, nil
}

// forget drops the record of a removed image.
func (m *Manager) forget(id string) {
	m.recordsMu.Lock()
	delete(m.records, id)
	m.recordsMu.Unlock()
}
