//go:build !amd64

package bpftest

import "reflect"

//go:noinline
func trapSite(x int) int { return x + 1 }

func trapSiteAddr() uintptr { return reflect.ValueOf(trapSite).Pointer() }
