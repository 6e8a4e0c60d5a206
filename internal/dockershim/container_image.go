package dockershim

import (
	"context"
	"sync"
	"time"
)

// What a container's status says of its image, as the 1.23 dockershim and
// cri-dockerd say it: image is the image's first repo tag (else the name the
// container was created with: the kubelet creates them from the image ID),
// image_ref is "docker-pullable://<first repo digest>" (else
// "docker://<image ID>"), image_id the image ID. The kubelet shows the first
// two as the pod's status.containerStatuses[].image and .imageID.
const (
	dockerImageIDPrefix         = "docker://"
	dockerPullableImageIDPrefix = "docker-pullable://"
	// imageNamesTTL is how long an image's tags and digests are reused (a
	// status read must not cost an image inspect each time; a retag shows
	// within this).
	imageNamesTTL = 30 * time.Second
)

// imageNames caches each image's status names by image ID.
type imageNames struct {
	mu      sync.Mutex
	entries map[string]imageNamesEntry
}

type imageNamesEntry struct {
	tag, ref string // "" tag: none
	at       time.Time
}

// imageOf returns the image name and ref a status of a container created
// as created from image id shows. An image Docker no longer knows keeps the
// created name and the plain ID ref.
func (s *Service) imageOf(ctx context.Context, id, created string, now time.Time) (name, ref string) {
	name, ref = created, dockerImageIDPrefix+id
	if id == "" {
		return created, ""
	}
	c := &s.images
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) > imageNamesTTL {
		e = imageNamesEntry{ref: ref, at: now}
		ii, err := s.docker.InspectImage(ctx, id)
		if err != nil && !imageNotFound(err) {
			return name, ref // not cached: asked again next time
		}
		if err == nil {
			if tags := cleanRepoTags(ii.RepoTags); len(tags) > 0 {
				e.tag = tags[0]
			}
			if digests := cleanRepoDigests(ii.RepoDigests); len(digests) > 0 {
				e.ref = dockerPullableImageIDPrefix + digests[0]
			}
		}
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[string]imageNamesEntry{}
		}
		for k, old := range c.entries { // drop the expired ones
			if now.Sub(old.at) > imageNamesTTL {
				delete(c.entries, k)
			}
		}
		c.entries[id] = e
		c.mu.Unlock()
	}
	if e.tag != "" {
		name = e.tag
	}
	return name, e.ref
}
