package testimage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
)

// MaxFileSize bounds the body of PUT /files/<name>: files prove that a volume persists, they are
// not a transfer benchmark, and the bound keeps a test's mistake from filling a node's disk.
const MaxFileSize = 1 << 20

// FileResult is the answer of PUT /files/<name>.
type FileResult struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// serveFiles reads and writes single files directly in DataDir. The name is one path element of
// [A-Za-z0-9._-], so no request can reach outside DataDir or into a subdirectory.
func (h *handler) serveFiles(w http.ResponseWriter, r *http.Request, name string) {
	if !allow(w, r, http.MethodGet, http.MethodHead, http.MethodPut) {
		return
	}
	if err := validFileName(name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if h.cfg.DataDir == "" {
		writeError(w, http.StatusServiceUnavailable, "no data directory is configured (DATA_DIR)")
		return
	}
	path := filepath.Join(h.cfg.DataDir, name)
	if r.Method == http.MethodPut {
		h.putFile(w, r, name, path)
		return
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no file %q", name))
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	}
}

// putFile writes the body to a temporary file in the same directory and renames it over path, so a
// reader (or a Pod killed mid-write) sees the old content or the new, never a part.
func (h *handler) putFile(w http.ResponseWriter, r *http.Request, name, path string) {
	if r.ContentLength > MaxFileSize {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body has %d bytes, more than %d", r.ContentLength, MaxFileSize))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFileSize))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body has more than %d bytes", MaxFileSize))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err))
		return
	}
	if err := writeFileAtomic(path, body); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, FileResult{Name: name, Size: int64(len(body))})
}

func writeFileAtomic(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	// Sync before the rename: a test that restarts the Pod right after the PUT must find the
	// content, not an empty file the rename made visible before the data reached the disk.
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// validFileName accepts one path element of [A-Za-z0-9._-], not "." or "..".
func validFileName(name string) error {
	const param = "name"
	switch name {
	case "":
		return fmt.Errorf("%s: Required value: the path is /files/<name>", param)
	case ".", "..":
		return invalidParam(param, name, "must not be . or ..")
	}
	if len(name) > 255 {
		return invalidParam(param, name, "must be at most 255 characters")
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalidParam(param, name, "must be one path element of the characters A-Z a-z 0-9 . _ -")
		}
	}
	return nil
}
