//go:build !amd64

package trapcost

import "reflect"

//go:noinline
func trapSite(x int) int { return x + 1 }

func trapSiteAddr() uintptr { return reflect.ValueOf(trapSite).Pointer() }
