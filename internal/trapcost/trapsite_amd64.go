package trapcost

// trapSite is the function the trap is measured on (trapsite_amd64.s).
//
//go:noescape
func trapSite(x int) int

func trapSiteAddr() uintptr
