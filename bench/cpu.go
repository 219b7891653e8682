package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports (the kernel exports
// no other value to user space there), so it is not read with sysconf.
const clockTicks = 100

// cpuSeconds returns user+system CPU time of a process from
// /proc/<pid>/stat (pid 0: this process). Threads are included; children
// are not.
func cpuSeconds(pid int) (float64, error) {
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", p)
	}
	f := strings.Fields(s[i+1:])
	// After ")": state is field 3, so utime (14) and stime (15) are
	// f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", p, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: bad utime/stime %q %q", p, f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// cpuSample is the CPU time of the server processes and of this process.
type cpuSample struct {
	server, self float64
	err          error
}

func sampleCPU(pids []int) cpuSample {
	var s cpuSample
	for _, p := range pids {
		c, err := cpuSeconds(p)
		if err != nil && s.err == nil {
			s.err = err
		}
		s.server += c
	}
	s.self, _ = cpuSeconds(0)
	return s
}

// profile is a CPU profile of this process being written (--cpuprofile).
type profile struct {
	f   *os.File
	err error
}

// startProfile starts a CPU profile into path; its error, if any, is kept
// for the result (a profile is an aid, never a reason to fail a run).
func startProfile(path string) *profile {
	f, err := os.Create(path)
	if err != nil {
		return &profile{err: err}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return &profile{err: err}
	}
	return &profile{f: f}
}

func (p *profile) stop() {
	if p == nil || p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := p.f.Close(); err != nil && p.err == nil {
		p.err = err
	}
}
