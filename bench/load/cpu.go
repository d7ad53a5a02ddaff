package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports (the kernel's sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// processCPU returns the CPU time (user plus system) process pid has used
// so far, from /proc/<pid>/stat. Linux only: elsewhere it is an error.
func processCPU(pid int) (time.Duration, error) {
	if runtime.GOOS != "linux" {
		return 0, errors.New("CPU time needs Linux's /proc")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	// pid (comm) state ppid … : comm may hold spaces and parentheses, so
	// the fields start after the last ')'. utime and stime are fields 14
	// and 15, i.e. 11 and 12 after state.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("process %d: unreadable /proc stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("process %d: short /proc stat", pid)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: /proc stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// processesCPU sums processCPU over pids.
func processesCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, p := range pids {
		d, err := processCPU(p)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// CPU is what the target's server processes (Target.PIDs) spent in the
// measured window: CPU seconds (user plus system), and per unit of record
// value bytes acknowledged in the window. NA says why there are no figures
// (no pids given, not Linux, a process gone).
type CPU struct {
	Seconds *float64 `json:"cpu_s,omitempty"`
	// PerGiB is CPU seconds per GiB (2^30 bytes) of record values
	// produced.
	PerGiB *float64 `json:"cpu_s_per_gib,omitempty"`
	// MBPerCore is MB/s produced per core busy: MB produced / CPU seconds.
	MBPerCore *float64 `json:"mb_per_s_per_core,omitempty"`
	NA        string   `json:"na,omitempty"`
}

// cpuFigures derives CPU from the processes' CPU time used in the window
// and the value bytes produced in it.
func cpuFigures(used time.Duration, producedBytes int64) CPU {
	s := used.Seconds()
	c := CPU{Seconds: &s}
	if producedBytes > 0 {
		per := s / (float64(producedBytes) / (1 << 30))
		c.PerGiB = &per
	}
	if s > 0 {
		mb := float64(producedBytes) / 1e6 / s
		c.MBPerCore = &mb
	}
	return c
}

// parsePIDs parses a comma-separated list of process ids.
func parsePIDs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad process id %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
