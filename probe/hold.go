package probe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A held child is this very executable, started again in a tiny hold mode
// (selected by holdEnv): it waits for one byte on a pipe and then execve()s
// the target in place. The PID never changes, so probes and PID filters set
// up while it waits cover the target from its first instruction, and the
// target cannot run any code of its own before Release. Ptrace would do the
// same but keeps a tracer attached and conflicts with debuggers.
//
// The hold mode runs from this package's init, before main: any program
// that imports probe can be re-executed this way.
const holdEnv = "SQSCOPE_PROBE_HOLD"

// holdCredEnv, when set, names the user and groups the hold process
// becomes before its exec ("UID:GID:G1,G2,..."; Cred.Hold sets it).
const holdCredEnv = "SQSCOPE_PROBE_HOLD_CRED"

// Cred is a user a started command runs as (sqscope's -u): its user and
// group ids and supplementary groups.
type Cred struct {
	User   string // as given, for messages
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Hold makes the held command cmd run as c: the hold process, started as
// root, takes c's groups and ids just before its exec (so that it need
// not be able to run this executable).
func (c *Cred) Hold(cmd *exec.Cmd) {
	groups := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, fmt.Sprintf("%s=%d:%d:%s", holdCredEnv, c.UID, c.GID, strings.Join(groups, ",")))
}

// becomeUser takes the user and groups cred says ("UID:GID:G1,G2").
func becomeUser(cred string) error {
	f := strings.SplitN(cred, ":", 3)
	if len(f) != 3 {
		return fmt.Errorf("bad %s %q", holdCredEnv, cred)
	}
	uid, err1 := strconv.Atoi(f[0])
	gid, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("bad %s %q: %w", holdCredEnv, cred, err)
	}
	var groups []int
	for _, g := range strings.Split(f[2], ",") {
		if g == "" {
			continue
		}
		n, err := strconv.Atoi(g)
		if err != nil {
			return fmt.Errorf("bad %s %q: %w", holdCredEnv, cred, err)
		}
		groups = append(groups, n)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}

// File descriptors of the hold process (cmd.ExtraFiles start at 3).
const (
	holdGoFD  = 3 // read: one byte means exec, EOF means give up
	holdErrFD = 4 // write: why exec failed; closed by a successful exec
)

func init() {
	if os.Getenv(holdEnv) == "1" {
		os.Exit(hold())
	}
}

// hold is the hold mode: os.Args is [self, path, argv...].
func hold() int {
	errPipe := os.NewFile(holdErrFD, "hold-err")
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if errPipe != nil {
			errPipe.WriteString(msg)
		}
		fmt.Fprintln(os.Stderr, "sqscope: "+msg)
		return 127
	}
	if len(os.Args) < 3 {
		return fail("hold mode: no command")
	}
	gate := os.NewFile(holdGoFD, "hold-go")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		return 126 // the tracer gave up: never run the target
	}
	gate.Close()
	syscall.CloseOnExec(holdErrFD)
	if cred, ok := os.LookupEnv(holdCredEnv); ok {
		// a change of user clears the parent-death signal: set it again,
		// and give up if the parent died before it was
		var sig int
		ppid := os.Getppid()
		unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0)
		if err := becomeUser(cred); err != nil {
			return fail("running %s as %s: %v", os.Args[1], cred, err)
		}
		if sig != 0 {
			unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0)
			if os.Getppid() != ppid {
				return 126
			}
		}
	}
	env := make([]string, 0, len(os.Environ()))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, holdEnv+"=") && !strings.HasPrefix(e, holdCredEnv+"=") {
			env = append(env, e)
		}
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	return fail("exec %s: %v", os.Args[1], err)
}

// Child is a process started by StartHeld, held before its first
// instruction until Release.
type Child struct {
	// Path is the resolved executable of the command (what runs after
	// Release); Args its argv.
	Path string
	Args []string

	cmd      *exec.Cmd
	gate     *os.File
	errPipe  *os.File
	released bool
}

// StartHeld starts argv with the environment env (nil: this process's),
// with the standard streams of this process, held until Release.
func StartHeld(argv []string, env []string) (*Child, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to start")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return StartHeldCmd(cmd)
}

// StartHeldCmd is StartHeld for a prepared command: its Path, Args, Env,
// Dir, standard streams and SysProcAttr are kept; it must not be started.
func StartHeldCmd(cmd *exec.Cmd) (*Child, error) {
	if cmd.Process != nil {
		return nil, errors.New("command already started")
	}
	if len(cmd.Args) == 0 {
		cmd.Args = []string{cmd.Path}
	}
	path := cmd.Path // exec.Command's own lookup error (cmd.Err) is redone below, in one line
	cmd.Err = nil
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("command not found: %s", path)
		}
		path = p
	}
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("command %s: %w", path, err)
	} else if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("command %s is not an executable file", path)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to hold %s: %w", path, err)
	}

	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		gateR.Close()
		gateW.Close()
		return nil, err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	argv := cmd.Args
	cmd.Path = self
	cmd.Args = append([]string{self, path}, argv...)
	cmd.Env = append(append([]string{}, env...), holdEnv+"=1")
	cmd.ExtraFiles = []*os.File{gateR, errW}
	if a := cmd.SysProcAttr; a != nil && a.Pdeathsig != 0 {
		err = startOnForkThread(cmd)
	} else {
		err = cmd.Start()
	}
	gateR.Close()
	errW.Close()
	if err != nil {
		gateW.Close()
		errR.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return &Child{Path: path, Args: argv, cmd: cmd, gate: gateW, errPipe: errR}, nil
}

// Pid is the child's process id, the same before and after Release.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Release lets the child exec the command. It returns once the exec has
// happened, or with the reason it failed.
func (c *Child) Release() error {
	if c.released {
		return nil
	}
	c.released = true
	_, err := c.gate.Write([]byte{1})
	c.gate.Close()
	if err != nil {
		c.errPipe.Close()
		return fmt.Errorf("releasing %s: %w", c.Path, err)
	}
	msg, _ := io.ReadAll(c.errPipe) // EOF when exec closed it
	c.errPipe.Close()
	if len(msg) > 0 {
		return errors.New(string(msg))
	}
	return nil
}

// Kill ends a child that should not run after all (a held child exits
// without running the command).
func (c *Child) Kill() error {
	if !c.released {
		c.released = true
		c.gate.Close()
		c.errPipe.Close()
		return nil
	}
	return c.cmd.Process.Kill()
}

// Wait waits for the child to exit.
func (c *Child) Wait() (*os.ProcessState, error) {
	err := c.cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		err = nil // a non-zero status is in the ProcessState
	}
	return c.cmd.ProcessState, err
}

// A parent-death signal (SysProcAttr.Pdeathsig, so that a command sqscope
// started ends when sqscope dies, however) is sent when the thread that
// forked the child ends, not the process: Go ends a thread when a
// goroutine locked to it returns (the live view's). So such children are
// forked from one thread kept for that, locked to a goroutine that never
// returns.
var forkThread = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range ch {
			f()
		}
	}()
	return ch
})

// startOnForkThread starts cmd from the fork thread.
func startOnForkThread(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	forkThread() <- func() { done <- cmd.Start() }
	return <-done
}
