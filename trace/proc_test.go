package trace

// procEvents are the processes of a followed tree: the target, a child it
// forked that ran a new program, and that child's exit.
func procEvents() []Event {
	return []Event{
		&Proc{Header: Header{TimeNS: 5_000_000, PID: 4242, TID: 4242}, How: ProcTarget, Comm: "sh"},
		&Proc{Header: Header{TimeNS: 5_000_100, PID: 4250, TID: 4250}, How: ProcFork, Parent: 4242, Comm: "sh"},
		&Proc{Header: Header{TimeNS: 5_000_200, PID: 4250, TID: 4250}, How: ProcExec, Comm: "ib_write_bw"},
		&Proc{Header: Header{TimeNS: 5_000_300, PID: 4260, TID: 4260}, How: ProcRunning, Comm: "a name of 16 b.."},
		&Exit{Header: Header{TimeNS: 6_000_000, PID: 4250, TID: 4251}, Code: 1},
	}
}
