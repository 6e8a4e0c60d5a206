package nodecontainer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// CopyIn copies the host file or directory hostPath to containerPath
// (absolute) in the node, as root with the modes kept; missing parent
// directories are created.
func (n *Node) CopyIn(t testing.TB, hostPath, containerPath string) {
	t.Helper()
	if err := n.copyIn(map[string]string{containerPath: hostPath}); err != nil {
		t.Fatal(err)
	}
}

// copyIn streams one tar of every file (container path -> host path) into
// `docker cp - <node>:/`, which works on a created container as on a
// running one.
func (n *Node) copyIn(files map[string]string) error {
	for dst := range files {
		if !path.IsAbs(dst) {
			return fmt.Errorf("node %s: copy to %q: the container path must be absolute", n.Name, dst)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), imagesTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	cmd := exec.CommandContext(ctx, "docker", "cp", "-", n.ID+":/")
	cmd.Stdin = pr
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: docker cp: %w", n.Name, err)
	}
	writeErr := make(chan error, 1)
	go func() {
		err := writeTar(pw, files)
		_ = pw.CloseWithError(err)
		writeErr <- err
	}()
	runErr := cmd.Wait()
	// docker cp may stop reading early; unblock the writer.
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if err := <-writeErr; err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("node %s: copy in: %w", n.Name, err)
	}
	if runErr != nil {
		return fmt.Errorf("node %s: docker cp - %s:/: %w: %s", n.Name, n.ContainerName, runErr, out.String())
	}
	return nil
}

// writeTar writes a tar of files (container path -> host path) to w, with
// names relative to the container's root.
func writeTar(w io.Writer, files map[string]string) error {
	tw := tar.NewWriter(w)
	for _, dst := range sortedKeys(files) {
		src := files[dst]
		root := strings.TrimPrefix(path.Clean(dst), "/")
		err := filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			return addEntry(tw, p, path.Join(root, filepath.ToSlash(rel)))
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// addEntry adds the host file src (a regular file, a directory or a
// symbolic link) to tw as name, owned by root.
func addEntry(tw *tar.Writer, src, name string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	var link string
	switch {
	case fi.Mode().IsRegular(), fi.IsDir():
	case fi.Mode()&fs.ModeSymlink != 0:
		if link, err = os.Readlink(src); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: cannot copy a %s", src, fi.Mode().Type())
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// LoadImages copies images from the host's dockerd into the node's
// (docker save | docker exec -i <node> docker load), within five minutes.
func (n *Node) LoadImages(t testing.TB, images ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), imagesTimeout)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", append([]string{"save"}, images...)...)
	load := exec.CommandContext(ctx, "docker", "exec", "-i", n.ID, "docker", "load")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	load.Stdin = pipe
	var saveErr, loadOut strings.Builder
	save.Stderr = &saveErr
	load.Stdout, load.Stderr = &loadOut, &loadOut
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	loadRunErr := load.Run()
	if loadRunErr != nil {
		// Nobody reads the pipe any more: do not let save block on it.
		cancel()
	}
	if err := save.Wait(); err != nil && loadRunErr == nil {
		t.Fatalf("docker save %v on the host (scripts/build-images.sh builds the project's images): %v: %s",
			images, err, saveErr.String())
	}
	if loadRunErr != nil {
		t.Fatalf("docker load into node %s: %v: %s", n.Name, loadRunErr, loadOut.String())
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
