/* A complete Write-with-Immediate exchange between two applications, each
 * on its own softmrcd endpoint.
 *
 *   wimm_exchange receiver|sender SOCKET
 *
 * Each side prints one line with what its peer needs (QPN, PSN, rkey,
 * address, GID) and reads the peer's line from stdin: the out-of-band
 * exchange, as with RDMA. The sender writes 4096 bytes with an immediate
 * into the receiver's buffer; the receiver waits on its completion channel
 * and checks the immediate and every byte. Exit status 0 on success. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softmrc/softmrc.h>

#define BYTES 4096
#define IMM 0x5eed

static int die(const char* what, int err) {
  fprintf(stderr, "wimm_exchange: %s: %s\n", what, strerror(err));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) return fprintf(stderr, "usage: %s receiver|sender SOCKET\n", argv[0]), 2;
  const int sender = strcmp(argv[1], "sender") == 0;

  struct smrc_context* ctx = smrc_open_device(argv[2]);
  if (!ctx) return die("open_device", errno);
  struct smrc_pd* pd = smrc_alloc_pd(ctx);
  struct smrc_comp_channel* ch = smrc_create_comp_channel(ctx);
  struct smrc_cq* cq = smrc_create_cq(ctx, 64, NULL, ch);
  struct smrc_mr* mr = smrc_alloc_mr(pd, BYTES, SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE);
  if (!pd || !ch || !cq || !mr) return die("setup", errno);
  struct smrc_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq,
                                 .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1}};
  struct smrc_qp* qp = smrc_create_qp(pd, &ia);
  if (!qp) return die("create_qp", errno);

  /* RESET -> INIT with the daemon's default EV and CC profiles. */
  struct smrc_qp_attr a = {.qp_state = SMRC_QPS_INIT};
  int err = smrc_modify_qp(qp, &a, SMRC_QP_STATE);
  if (err) return die("modify INIT", err);
  /* Receives are posted before the peer can send: MRC has no RNR. */
  if (!sender) {
    struct smrc_recv_wr rwr = {.wr_id = 1};
    if ((err = smrc_post_recv(qp, &rwr, NULL))) return die("post_recv", err);
  }

  /* Out of band: our line out, the peer's in. */
  union smrc_gid gid, peer_gid;
  smrc_query_gid(ctx, 0, &gid);
  const uint32_t psn = sender ? 100 : 200;
  printf("%u %u %u %" PRIu64, smrc_qp_num(qp), psn, mr->rkey, (uint64_t)(uintptr_t)mr->addr);
  for (int i = 0; i < 16; ++i) printf(" %u", gid.raw[i]);
  printf("\n");
  fflush(stdout);
  unsigned peer_qpn, peer_psn, peer_rkey, g[16];
  uint64_t peer_addr;
  if (scanf("%u %u %u %" SCNu64, &peer_qpn, &peer_psn, &peer_rkey, &peer_addr) != 4)
    return die("reading the peer's line", EINVAL);
  for (int i = 0; i < 16; ++i) {
    if (scanf("%u", &g[i]) != 1) return die("reading the peer's GID", EINVAL);
    peer_gid.raw[i] = (uint8_t)g[i];
  }

  /* INIT -> RTR -> RTS. A small ACK timeout and retry count keep a dead
   * peer from holding us for long. */
  a = (struct smrc_qp_attr){.qp_state = SMRC_QPS_RTR, .dgid = peer_gid, .dest_qp_num = peer_qpn,
                            .rq_psn = peer_psn};
  err = smrc_modify_qp(qp, &a, SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN);
  if (err) return die("modify RTR", err);
  a = (struct smrc_qp_attr){.qp_state = SMRC_QPS_RTS, .sq_psn = psn, .timeout = 14,
                            .retry_linear = 7, .retry_exp = 3};
  err = smrc_modify_qp(qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_TIMEOUT |
                                   SMRC_QP_RETRY_CNT);
  if (err) return die("modify RTS", err);

  struct smrc_wc wc;
  int n = 0;
  if (sender) {
    unsigned char* buf = mr->addr;
    for (int i = 0; i < BYTES; ++i) buf[i] = (unsigned char)(i * 7 + 1);
    struct smrc_sge sge = {.addr = (uintptr_t)buf, .length = BYTES, .lkey = mr->lkey};
    struct smrc_send_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1,
                              .opcode = SMRC_WR_RDMA_WRITE_WITH_IMM,
                              .send_flags = SMRC_SEND_SIGNALED, .imm_data = htonl(IMM),
                              .rdma = {.remote_addr = peer_addr, .rkey = peer_rkey}};
    if ((err = smrc_post_send(qp, &wr, NULL))) return die("post_send", err);
    while ((n = smrc_poll_cq(cq, 1, &wc)) == 0) {
    }
  } else {
    /* Arm, poll once more, then sleep on the channel. */
    while (n == 0) {
      if ((err = smrc_req_notify_cq(cq, 0))) return die("req_notify_cq", err);
      if ((n = smrc_poll_cq(cq, 1, &wc)) != 0) break;
      struct smrc_cq* ev_cq;
      void* ev_ctx;
      if ((err = smrc_get_cq_event(ch, &ev_cq, &ev_ctx, 10000))) return die("get_cq_event", err);
      smrc_ack_cq_events(ev_cq, 1);
      n = smrc_poll_cq(cq, 1, &wc);
    }
  }
  if (n < 0) return die("poll_cq", -n);
  if (wc.status != SMRC_WC_SUCCESS) {
    fprintf(stderr, "wimm_exchange: completion: %s\n", smrc_wc_status_str(wc.status));
    return 1;
  }
  if (!sender) {
    const unsigned char* buf = mr->addr;
    if (wc.opcode != SMRC_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != IMM ||
        wc.byte_len != BYTES)
      return die("unexpected completion", EPROTO);
    for (int i = 0; i < BYTES; ++i)
      if (buf[i] != (unsigned char)(i * 7 + 1)) return die("byte mismatch", EIO);
  }
  printf("%s: ok\n", sender ? "sender" : "receiver");

  smrc_destroy_qp(qp);
  smrc_free_mr(mr);
  smrc_destroy_cq(cq);
  smrc_destroy_comp_channel(ch);
  smrc_dealloc_pd(pd);
  smrc_close_device(ctx);
  return 0;
}
