package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// replacement is a file's new content and the content it replaces, kept so that a failed
// migration can put it back.
type replacement struct {
	// name is the file as given, for messages; a symbolic link is followed.
	name     string
	old, new []byte
}

// staged is a replacement whose new content is written to tmp, beside target.
type staged struct {
	replacement
	target string
	mode   fs.FileMode
	tmp    string
}

// replaceAll gives every file its new content, or none of them. Each new content is first
// written to a temporary file in its target's own directory (the same file system, so the rename
// is atomic), with the target's permissions, and synced; only when every one is staged are they
// renamed into place. If any cannot be staged, every temporary file is removed and no file is
// touched. If a rename fails after others succeeded (unlikely: each stays within a directory),
// the files already replaced get their old content back the same way, and the error says which,
// if any, could not be restored. Symbolic links are followed, so a link stays a link.
//
// rename is os.Rename but for tests, which make it fail.
func replaceAll(files []replacement, rename func(oldpath, newpath string) error) error {
	var done []*staged
	removeTemps := func(ss []*staged) {
		for _, s := range ss {
			os.Remove(s.tmp)
		}
	}
	for _, r := range files {
		s, err := stage(r)
		if err != nil {
			removeTemps(done)
			return fmt.Errorf("writing %s: %w; nothing was changed", r.name, err)
		}
		done = append(done, s)
	}
	for i, s := range done {
		if err := rename(s.tmp, s.target); err != nil {
			removeTemps(done[i:])
			return restore(fmt.Errorf("writing %s: moving the new content into place: %w", s.name, cause(err)), done[:i], rename)
		}
	}
	return nil
}

// stage writes r's new content to a temporary file beside its target, synced and with the
// target's permissions. A failure leaves no temporary file.
func stage(r replacement) (*staged, error) {
	target, err := filepath.EvalSymlinks(r.name)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	s := &staged{replacement: r, target: target, mode: info.Mode().Perm()}
	if s.tmp, err = writeTemp(target, r.new, s.mode); err != nil {
		return nil, err
	}
	return s, nil
}

// writeTemp writes data to a new hidden file beside target, with mode, synced, and returns its
// name. The errors name the step and the directory, not the temporary file's random name.
func writeTemp(target string, data []byte, mode fs.FileMode) (string, error) {
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".migrate-*")
	if err != nil {
		return "", fmt.Errorf("creating a temporary file in %s: %w", dir, cause(err))
	}
	fail := func(step string, err error) (string, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("%s the temporary file in %s: %w", step, dir, cause(err))
	}
	if _, err := tmp.Write(data); err != nil {
		return fail("writing", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fail("setting the mode of", err)
	}
	if err := tmp.Sync(); err != nil {
		return fail("syncing", err)
	}
	if err := tmp.Close(); err != nil {
		return fail("closing", err)
	}
	return tmp.Name(), nil
}

// restore puts the old content back into files already replaced, after err stopped a
// replacement, and says what became of them.
func restore(err error, replaced []*staged, rename func(oldpath, newpath string) error) error {
	if len(replaced) == 0 {
		return fmt.Errorf("%w; nothing was changed", err)
	}
	var restored, lost []string
	for _, s := range replaced {
		tmp, werr := writeTemp(s.target, s.old, s.mode)
		if werr == nil {
			if werr = rename(tmp, s.target); werr != nil {
				os.Remove(tmp)
				werr = cause(werr)
			}
		}
		if werr != nil {
			lost = append(lost, fmt.Sprintf("%s (%v)", s.name, werr))
			continue
		}
		restored = append(restored, s.name)
	}
	if len(lost) == 0 {
		return fmt.Errorf("%w; %s got %s old content back: no file's content was changed",
			err, strings.Join(restored, ", "), plural(len(restored), "its", "their"))
	}
	return fmt.Errorf("%w; could not put the old content back into %s: %s migrated, every other file is as it was",
		err, strings.Join(lost, ", "), plural(len(lost), "that file is", "those files are"))
}

// cause is err without the path of a *fs.PathError or the paths of an *os.LinkError: the paths
// the caller names are more useful than a temporary file's random name.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
