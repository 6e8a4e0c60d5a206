package dockershim

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

func TestImageStatusFake(t *testing.T) {
	t.Parallel()
	f := &statsFakeDocker{images: []libdocker.ImageSummary{{ID: imageTestID, RepoTags: []string{"busybox:latest"}, Size: 7}}}
	s := statsTestService(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		desc    string
		ref     string
		verbose bool
		wantID  string
		wantErr error
	}{
		{desc: "empty reference", ref: "", wantErr: ErrInvalidArgument},
		{desc: "unknown image is no error", ref: "sha256:0000"},
		{desc: "known image", ref: imageTestID, wantID: imageTestID},
		{desc: "verbose", ref: imageTestID, verbose: true, wantID: imageTestID},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, err := s.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: tc.ref}, Verbose: tc.verbose})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Image.GetId() != tc.wantID {
				t.Errorf("image = %v, want id %q", resp.Image, tc.wantID)
			}
			if !tc.verbose {
				return
			}
			var info map[string]any
			if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
				t.Fatalf("info is not JSON: %v", err)
			}
			if info["id"] != imageTestID || info["imageSpec"] == nil {
				t.Errorf("info = %v", info)
			}
		})
	}
}
