package ociimage

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push uploads an index and its images to ref (a tag) with the credentials docker and crane use
// (authn.DefaultKeychain: ~/.docker/config.json, $DOCKER_CONFIG, credential helpers), and returns
// the pushed reference by digest. Loopback registries are spoken to over plain HTTP, as
// go-containerregistry does for localhost and 127.0.0.1.
func Push(ctx context.Context, idx v1.ImageIndex, ref string) (name.Digest, error) {
	r, err := name.NewTag(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, err
	}
	h, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(h.String()), nil
}
