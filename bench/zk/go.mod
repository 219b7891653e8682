module github.com/grackle-coord/grackle/bench/zk

go 1.26.8

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/grackle-coord/grackle v0.0.0
	github.com/spf13/pflag v1.0.9
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The product's module, from this repository: this module is built only
// from a checkout (make compare-bench).
replace github.com/grackle-coord/grackle => ../..
