package watch

import (
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/internal/vtcodec"
)

// MaxMessageBytes bounds one watch message, a quarter of a gRPC client's
// default 4 MiB receive limit: holders and waiters with metadata at its
// bounds made a message of 1,000 holders 12.7 MB, which no default client
// could read and which cost the leader that much per watcher.
const MaxMessageBytes = 1 << 20

// elemOverhead is what one element of a repeated field costs beyond its
// own encoding (its tag and length), at most.
const elemOverhead = 1 + 5

// fitLists keeps the longest prefixes of holders, then of waiters, that fit
// in budget bytes besides base (the message without the lists). The
// message's counts stay complete: a client sees that a list was cut.
func fitLists[H, W proto.Message](base int, holders []H, waiters []W) ([]H, []W) {
	left := MaxMessageBytes - base
	holders, left = fitPrefix(holders, left)
	waiters, _ = fitPrefix(waiters, left)
	return holders, waiters
}

func fitPrefix[T proto.Message](items []T, left int) ([]T, int) {
	for i, it := range items {
		n := vtcodec.Size(it) + elemOverhead
		if n > left {
			return items[:i], 0
		}
		left -= n
	}
	return items, left
}
