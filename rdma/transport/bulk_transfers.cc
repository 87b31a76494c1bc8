// BulkTransfers instantiated for the connection's port (bulk_transfers.h;
// the member functions are in bulk_transfers_impl.h).
#include "rdma/transport/bulk_transfers_impl.h"
#include "rdma/transport/rdma_connection.h"

namespace siphon::rdma {

template class BulkTransfers<RdmaConnection::BulkPort>;

}  // namespace siphon::rdma
