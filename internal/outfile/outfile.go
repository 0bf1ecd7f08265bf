// Package outfile is how sqscope writes an output file while it runs as
// root: only to a regular file or to standard output ("-"), never through a
// symbolic link, never over one of its inputs or over an existing recording
// unless forced, and never leaving a half-written file in place of a good
// one. See docs/design.md.
package outfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Stdout is the output name that means standard output, for every command.
const Stdout = "-"

// recordingMagic starts every recording (trace's file header).
var recordingMagic = []byte("SQSCOPE\x00")

// Check says why path cannot be an output: it is a symbolic link, not a
// regular file (a device, a directory, a pipe), one of the inputs, or an
// existing recording while force is false. It returns whether path exists.
func Check(path string, inputs []string, force bool) (exists bool, err error) {
	if path == Stdout {
		return false, nil
	}
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return true, fmt.Errorf("%s is a symbolic link: outputs are not written through links (give the file it points to)", path)
	case !st.Mode().IsRegular():
		return true, fmt.Errorf("%s is %s, not a regular file: give a file name, or %s for standard output", path, kind(st.Mode()), Stdout)
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return true, fmt.Errorf("%s is also an input: give another output", path)
		}
	}
	if !force && isRecording(path) {
		return true, fmt.Errorf("%s is an existing recording: give --force to replace it", path)
	}
	return true, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

func isRecording(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(recordingMagic))
	_, err = io.ReadFull(f, b)
	return err == nil && bytes.Equal(b, recordingMagic)
}

// File is an output being written. A new file is written in place; an
// existing one is replaced only by Commit, from a temporary file next to
// it, so a failed run leaves the old file as it was.
type File struct {
	*os.File
	path    string
	replace bool // writing a temporary file, renamed over path by Commit
	done    bool
}

// Create checks path (see Check) and opens it for writing with mode perm:
// in place when it does not exist (created exclusively, so a file that
// appears meanwhile is not overwritten), else as a temporary file that
// Commit renames over it. The replaced file's mode and owner are kept
// when keepMode is set; otherwise the new file has perm. A new file run
// through sudo is the sudo user's (SUDO_UID, SUDO_GID).
func Create(path string, perm fs.FileMode, inputs []string, force, keepMode bool) (*File, error) {
	exists, err := Check(path, inputs, force)
	if err != nil {
		return nil, err
	}
	if !exists {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return nil, err
		}
		return giveToUser(&File{File: f, path: path})
	}
	mode := perm
	var keep *syscall.Stat_t // the replaced file's owner, kept with its mode
	if keepMode {
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
			keep, _ = st.Sys().(*syscall.Stat_t)
		}
	}
	f, err := replacement(path, mode)
	if err != nil {
		return nil, err
	}
	if keep == nil {
		return giveToUser(f)
	}
	if err := f.Chown(int(keep.Uid), int(keep.Gid)); err != nil && os.Geteuid() == 0 {
		f.Abort()
		return nil, err
	}
	return f, nil
}

// sudoUser is the user who ran sqscope through sudo (SUDO_UID and
// SUDO_GID), when it runs as root: the files a user asked for are that
// user's, as perf gives them.
func sudoUser() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	g, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil || u < 0 || g < 0 {
		return 0, 0, false
	}
	return u, g, true
}

// giveToUser makes a new output the sudo user's (sudoUser); on failure it
// is removed.
func giveToUser(f *File) (*File, error) {
	if uid, gid, ok := sudoUser(); ok {
		if err := f.Chown(uid, gid); err != nil {
			f.Discard()
			return nil, fmt.Errorf("giving %s to user %d (SUDO_UID): %w", f.path, uid, err)
		}
	}
	return f, nil
}

// replacement opens a temporary file next to path, with mode, that Commit
// renames over path. Its name is random and it is created exclusively, so
// no link planted beside path is ever written through.
func replacement(path string, mode fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, path: path, replace: true}, nil
}

// WriteFile writes data to path whole or not at all, as a file another
// process waits for must be: path is checked as Create checks it, data
// goes to a temporary file next to it (see replacement), which is renamed
// over path once complete, new file or not, so a reader never sees part of
// it.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	if path == Stdout {
		return fmt.Errorf("%s: give a file name", path)
	}
	if _, err := Check(path, nil, false); err != nil {
		return err
	}
	f, err := replacement(path, perm)
	if err == nil {
		f, err = giveToUser(f)
	}
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// Replaces reports whether the output replaces an existing file.
func (o *File) Replaces() bool { return o.replace }

// Commit syncs and closes the file and, when it replaces one, renames it
// into place.
func (o *File) Commit() error {
	o.done = true
	err := o.Sync()
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if !o.replace {
		return err
	}
	if err == nil {
		err = os.Rename(o.Name(), o.path)
	}
	if err != nil {
		os.Remove(o.Name())
	}
	return err
}

// Abort gives up the output: a replacement is removed and the old file
// stays; a new file is kept as far as it was written (a recording cut
// short is still readable up to the cut). No-op after Commit.
func (o *File) Abort() {
	if o.done {
		return
	}
	o.done = true
	o.Close()
	if o.replace {
		os.Remove(o.Name())
	}
}

// Discard removes what was written (a new file too), as after an export
// that failed before writing anything worth keeping. No-op after Commit.
func (o *File) Discard() {
	if o.done {
		return
	}
	o.done = true
	o.Close()
	os.Remove(o.Name())
}

// Dir makes path a directory for outputs, with mode 0700 when it creates
// it; an existing one must be a directory and not a symbolic link.
func Dir(path string) error {
	if path == Stdout {
		return fmt.Errorf("%s: give a directory", path)
	}
	err := os.Mkdir(path, 0o700)
	if err == nil {
		if uid, gid, ok := sudoUser(); ok {
			if err := os.Lchown(path, uid, gid); err != nil {
				return fmt.Errorf("giving %s to user %d (SUDO_UID): %w", path, uid, err)
			}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(path)
	switch {
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: outputs are not written through links (give the directory it points to)", path)
	case st.Mode().IsRegular():
		return fmt.Errorf("%s is a file, not a directory", path)
	case !st.IsDir():
		return fmt.Errorf("%s is %s, not a directory", path, kind(st.Mode()))
	}
	return nil
}

// CreateNew creates path with mode perm for writing, only if nothing is
// there: never over a file, never through a link. Abort keeps what was
// written, as of a new file from Create.
func CreateNew(path string, perm fs.FileMode) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	return giveToUser(&File{File: f, path: path})
}
