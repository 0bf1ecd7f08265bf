module github.com/sqscope/sqscope

go 1.26.8

require (
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
	github.com/cilium/ebpf v0.22.0
	github.com/gdamore/tcell/v2 v2.13.10
	github.com/klauspost/compress v1.20.4
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
	github.com/rivo/tview v0.42.0
	github.com/rivo/uniseg v0.4.7
	github.com/ulikunitz/xz v0.5.17
	golang.org/x/arch v0.33.0
	golang.org/x/sys v0.43.0
	golang.org/x/term v0.37.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gdamore/encoding v1.0.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/lucasb-eyer/go-colorful v1.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/text v0.31.0 // indirect
)

tool (
	github.com/cilium/ebpf/cmd/bpf2go
	google.golang.org/protobuf/cmd/protoc-gen-go
)
