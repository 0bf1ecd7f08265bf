package probe

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
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
	env := make([]string, 0, len(os.Environ()))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, holdEnv+"=") {
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
