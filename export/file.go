package export

import (
	"os"
	"path/filepath"
)

// File writes to a temporary file next to path, renamed into place by
// Commit, so a failed export leaves no half-written file behind.
type File struct {
	*os.File
	path string
	done bool
}

// CreateFile starts the output file for path.
func CreateFile(path string) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Commit puts the written file in place of path.
func (o *File) Commit() error {
	o.done = true
	if err := o.Close(); err != nil {
		os.Remove(o.Name())
		return err
	}
	if err := os.Rename(o.Name(), o.path); err != nil {
		os.Remove(o.Name())
		return err
	}
	return nil
}

// Abort removes what was written unless it was committed.
func (o *File) Abort() {
	if o.done {
		return
	}
	o.Close()
	os.Remove(o.Name())
}
