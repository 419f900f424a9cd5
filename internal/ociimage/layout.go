package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one file of an image layout: its slash-separated path and content.
type File struct {
	Name string
	Data []byte
}

// Files lays an index out as an OCI image layout (oci-layout, index.json, blobs/sha256/...)
// whose index.json names it ref, plus a docker `manifest.json` for one platform's image, so that
// one tarball of these files serves every consumer:
//
//   - `docker load` (either image store) and `kind load image-archive` (containerd's importer)
//     read manifest.json and load the load platform's image tagged ref; containerd also reads
//     index.json. This is the layout `docker save` itself has written since Docker 25.
//   - `crane push <tar>` reads manifest.json too, so it pushes that one image; the directory
//     (WriteDir) is the OCI layout `crane push <dir>` pushes as the whole index, digests kept.
//
// Only one platform can be in manifest.json: docker tags one image per name, and crane wants
// exactly one entry. The files are sorted by name.
func Files(idx v1.ImageIndex, ref, tag string, load Platform) ([]File, error) {
	blobs := map[string][]byte{}
	add := func(h v1.Hash, data []byte) {
		blobs["blobs/"+h.Algorithm+"/"+h.Hex] = data
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	add(digest, raw)
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var docker []dockerEntry
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		entry, err := addImage(img, add)
		if err != nil {
			return nil, err
		}
		if d.Platform != nil && d.Platform.Architecture == load.Arch && d.Platform.Variant == load.Variant {
			entry.RepoTags = []string{ref}
			docker = append(docker, entry)
		}
	}
	if len(docker) != 1 {
		return nil, fmt.Errorf("%s: the index has %d images for %s, want 1", ref, len(docker), load)
	}
	size, err := idx.Size()
	if err != nil {
		return nil, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return nil, err
	}
	top := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: mt, Size: size, Digest: digest,
		Annotations: map[string]string{RefName: tag, ImageName: ref},
	}}}
	indexJSON, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	manifestJSON, err := json.Marshal(docker)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Name: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{Name: "index.json", Data: indexJSON},
		{Name: "manifest.json", Data: manifestJSON},
	}
	for name, data := range blobs {
		files = append(files, File{Name: name, Data: data})
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// dockerEntry is one image of a docker-archive manifest.json, its paths those of the layout's
// blobs (docker load reads gzipped layers as they are).
type dockerEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func addImage(img v1.Image, add func(v1.Hash, []byte)) (dockerEntry, error) {
	var e dockerEntry
	raw, err := img.RawManifest()
	if err != nil {
		return e, err
	}
	digest, err := img.Digest()
	if err != nil {
		return e, err
	}
	add(digest, raw)
	cfg, err := img.RawConfigFile()
	if err != nil {
		return e, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return e, err
	}
	add(cfgName, cfg)
	e.Config = "blobs/" + cfgName.Algorithm + "/" + cfgName.Hex
	layers, err := img.Layers()
	if err != nil {
		return e, err
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return e, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return e, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return e, err
		}
		add(h, data)
		e.Layers = append(e.Layers, "blobs/"+h.Algorithm+"/"+h.Hex)
	}
	return e, nil
}

// WriteDir writes the files into dir, which must not exist yet or be empty: a layout with blobs
// of an earlier build would still pass for a valid one.
func WriteDir(dir string, files []File) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteTar writes the files as a tarball with their directories, in name order, owned by root,
// mode 0644 (0755 for directories), every mtime at mtime.
func WriteTar(w io.Writer, files []File, mtime time.Time) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	hdr := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: mtime.UTC(),
			Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
	}
	for _, f := range files {
		// Parent directories first, once each; sorted file names keep them in order.
		parts := strings.Split(f.Name, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(hdr(d, tar.TypeDir, 0o755, 0)); err != nil {
					return err
				}
			}
		}
		if err := tw.WriteHeader(hdr(f.Name, tar.TypeReg, 0o644, int64(len(f.Data)))); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Digest is the digest of an index, as the registry and `make release` pin it.
func Digest(idx v1.ImageIndex) (string, error) {
	h, err := idx.Digest()
	return h.String(), err
}
