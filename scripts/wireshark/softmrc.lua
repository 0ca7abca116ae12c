-- Wireshark dissector for the softmrc wire protocol v1 (MRC over RoCEv2).
--
-- Owns the display of everything after the UDP header on port 4791 whose
-- BTH opcode is an MRC opcode (0xC0-0xD4): BTH, MTH, the type header, the
-- payload and the ICRC, which it verifies with lib/wire's masking rule. It
-- also shows the EV the packet rides on (from the IP and UDP headers) and
-- whether a switch trimmed it. Other opcodes go to Wireshark's own
-- InfiniBand (RoCEv2) dissector. The layouts are lib/wire/headers.h; the
-- ICRC rule is lib/wire/icrc.cc. docs/wireshark.md says how to load it.

local mrc = Proto("softmrc", "softmrc MRC transport")

local kVersion = 1
local kFirstMrcOpcode, kLastMrcOpcode = 0xc0, 0xd4
local kBthLen, kMthLen, kIcrcLen = 12, 8, 4
local kBaseLen = kBthLen + kMthLen  -- in every MRC packet
local kDataHdrLen, kImmLen, kFeedbackHdrLen, kProbeHdrLen, kPortStatusHdrLen = 24, 4, 44, 24, 12
local kIpProtoRouting, kSrhRoutingType = 43, 4

local function is_data(op) return op >= 0xc0 and op <= 0xc5 end
local function has_imm(op) return op == 0xc4 or op == 0xc5 end

-- Names as lib/wire/names.cc spells them.
local opcode_names = {
  [0xc0] = "WRITE_FIRST",
  [0xc1] = "WRITE_MIDDLE",
  [0xc2] = "WRITE_LAST",
  [0xc3] = "WRITE_ONLY",
  [0xc4] = "WRITE_LAST_IMM",
  [0xc5] = "WRITE_ONLY_IMM",
  [0xd0] = "ACK",
  [0xd1] = "NACK",
  [0xd2] = "PROBE_REQUEST",
  [0xd3] = "PROBE_REPLY",
  [0xd4] = "PORT_STATUS",
}
local nack_names = {
  [0] = "none",
  [1] = "trimmed",
  [2] = "out_of_window",
  [3] = "remote_access",
  [4] = "invalid_request",
  [5] = "qp_gone",
}
local kIcrcGood, kIcrcBad, kIcrcUnverified, kIcrcAbsent = 0, 1, 2, 3
local icrc_status_names = {
  [kIcrcGood] = "Good",
  [kIcrcBad] = "Bad",
  [kIcrcUnverified] = "Unverified (not captured in full, or verification off)",
  [kIcrcAbsent] = "Absent (trimmed packet)",
}

local kEvUdp, kEvStev, kEvSrv6 = 0, 1, 2
local ev_mode_names = { [kEvUdp] = "UDP", [kEvStev] = "STEV", [kEvSrv6] = "SRv6" }

local f = {
  -- BTH
  opcode = ProtoField.uint8("softmrc.opcode", "Opcode", base.HEX, opcode_names),
  se = ProtoField.bool("softmrc.se", "Solicited event", 8, nil, 0x80),
  tver = ProtoField.uint8("softmrc.tver", "Transport header version", base.DEC, nil, 0x0f),
  pkey = ProtoField.uint16("softmrc.pkey", "Partition key", base.HEX),
  dest_qpn = ProtoField.uint24("softmrc.dest_qpn", "Destination QP", base.HEX),
  ack_req = ProtoField.bool("softmrc.ack_req", "AckReq", 8, nil, 0x80),
  psn = ProtoField.uint24("softmrc.psn", "PSN", base.DEC),
  -- MTH
  version = ProtoField.uint8("softmrc.version", "Version", base.DEC),
  mth_flags = ProtoField.uint8("softmrc.mth_flags", "Flags", base.HEX),
  mth_retransmit = ProtoField.bool("softmrc.mth_flags.retransmit", "Retransmit", 8, nil, 0x01),
  path_tag = ProtoField.uint32("softmrc.path_tag", "Path tag", base.HEX),
  -- DataHdr, ImmDt, payload
  va = ProtoField.uint64("softmrc.va", "Virtual address", base.HEX),
  rkey = ProtoField.uint32("softmrc.rkey", "R_Key", base.HEX),
  msg_len = ProtoField.uint32("softmrc.msg_len", "Message length", base.DEC),
  msn = ProtoField.uint32("softmrc.msn", "Message sequence number", base.DEC),
  offset = ProtoField.uint32("softmrc.offset", "Offset in message", base.DEC),
  imm = ProtoField.uint32("softmrc.imm", "Immediate data", base.HEX),
  payload = ProtoField.bytes("softmrc.payload", "Payload"),
  payload_len = ProtoField.uint32("softmrc.payload_len", "Payload length", base.DEC),
  -- FeedbackHdr
  cum_psn = ProtoField.uint32("softmrc.cum_psn", "Cumulative PSN", base.DEC, nil, 0x00ffffff),
  ref_psn = ProtoField.uint32("softmrc.ref_psn", "Referenced PSN", base.DEC, nil, 0x00ffffff),
  sack_base = ProtoField.uint32("softmrc.sack_base", "SACK base PSN", base.DEC, nil, 0x00ffffff),
  sack_bitmap = ProtoField.bytes("softmrc.sack_bitmap", "SACK bitmap"),
  sack_psn = ProtoField.uint24("softmrc.sack_psn", "Selectively acknowledged PSN", base.DEC),
  echo_tag = ProtoField.uint32("softmrc.echo_tag", "Echoed path tag", base.HEX),
  service_time_ns = ProtoField.uint32("softmrc.service_time_ns", "Service time (ns)", base.DEC),
  window_mpr = ProtoField.uint16("softmrc.window_mpr", "Window (128-PSN units)", base.DEC),
  ce_count = ProtoField.uint16("softmrc.ce_count", "CE-marked packets", base.DEC),
  nack_code = ProtoField.uint8("softmrc.nack_code", "NACK code", base.DEC, nack_names),
  fb_flags = ProtoField.uint8("softmrc.fb_flags", "Flags", base.HEX),
  fb_ecn_echo = ProtoField.bool("softmrc.fb_flags.ecn_echo", "ECN echo", 8, nil, 0x01),
  fb_svc_time_valid = ProtoField.bool("softmrc.fb_flags.svc_time_valid", "Service time valid", 8,
    nil, 0x02),
  fb_duplicate = ProtoField.bool("softmrc.fb_flags.duplicate", "Duplicate", 8, nil, 0x04),
  -- ProbeHdr (echo_tag and service_time_ns are shared with FeedbackHdr)
  probe_req_id = ProtoField.uint16("softmrc.probe.req_id", "Request id", base.HEX),
  probe_port = ProtoField.uint8("softmrc.probe.port", "Arrival port", base.DEC),
  probe_flags = ProtoField.uint8("softmrc.probe.flags", "Flags", base.HEX),
  probe_svc_time_valid = ProtoField.bool("softmrc.probe.flags.svc_time_valid",
    "Service time valid", 8, nil, 0x01),
  probe_t_send_ns = ProtoField.uint64("softmrc.probe.t_send_ns", "Send time (ns)", base.DEC),
  -- PortStatusHdr
  port_mask = ProtoField.uint32("softmrc.port_mask", "Usable planes mask", base.HEX),
  plane = ProtoField.uint8("softmrc.plane", "Usable plane", base.DEC),
  port_seq = ProtoField.uint32("softmrc.port_seq", "Update sequence", base.DEC),
  num_planes = ProtoField.uint8("softmrc.num_planes", "Planes", base.DEC),
  -- ICRC and trimming
  icrc = ProtoField.uint32("softmrc.icrc", "ICRC", base.HEX),
  icrc_calc = ProtoField.uint32("softmrc.icrc_calc", "Computed ICRC", base.HEX),
  icrc_status = ProtoField.uint8("softmrc.icrc_status", "ICRC status", base.DEC,
    icrc_status_names),
  trimmed = ProtoField.bool("softmrc.trimmed", "Trimmed by a switch"),
  trimmable = ProtoField.bool("softmrc.trimmable", "Marked trimmable"),
  -- The EV as carried by the IP and UDP headers
  ev_udp_sport = ProtoField.uint16("softmrc.ev.udp_sport", "EV (UDP source port)", base.HEX),
  ev_stev = ProtoField.uint32("softmrc.ev.stev", "EV (STEV: source port, flow label)", base.HEX),
  ev_srv6_dst = ProtoField.ipv6("softmrc.ev.srv6_dst", "EV (SRv6 destination)"),
  ev_srv6_segment = ProtoField.ipv6("softmrc.ev.srv6_segment", "EV (SRv6 SRH segment)"),
}
mrc.fields = f

local ef = {
  bad_icrc = ProtoExpert.new("softmrc.expert.bad_icrc", "ICRC does not match",
    expert.group.CHECKSUM, expert.severity.ERROR),
  unknown_version = ProtoExpert.new("softmrc.expert.unknown_version",
    "Unknown MTH version: the rest is not decoded", expert.group.UNDECODED, expert.severity.WARN),
  unknown_opcode = ProtoExpert.new("softmrc.expert.unknown_opcode",
    "Unassigned opcode in the MRC range", expert.group.UNDECODED, expert.severity.WARN),
  truncated = ProtoExpert.new("softmrc.expert.truncated", "Packet shorter than its headers",
    expert.group.MALFORMED, expert.severity.ERROR),
  trimmed = ProtoExpert.new("softmrc.expert.trimmed", "Payload trimmed by a switch",
    expert.group.SEQUENCE, expert.severity.NOTE),
  trimmed_not_data = ProtoExpert.new("softmrc.expert.trimmed_not_data",
    "Trimmed DSCP on a packet that is not data", expert.group.PROTOCOL, expert.severity.WARN),
  stray_bytes = ProtoExpert.new("softmrc.expert.stray_bytes",
    "Bytes where this packet type allows none", expert.group.MALFORMED, expert.severity.WARN),
}
mrc.experts = ef

mrc.prefs.ev_mode = Pref.enum("EV mode", kEvUdp,
  "Where the entropy value (path) rides: the UDP source port; STEV (source port << 16 | " ..
  "low 16 bits of the IPv6 flow label); or SRv6 (the IPv6 destination and SRH segment, " ..
  "which the ICRC then masks)",
  { { 1, "udp", kEvUdp }, { 2, "stev", kEvStev }, { 3, "srv6", kEvSrv6 } }, false)
mrc.prefs.verify_icrc = Pref.bool("Verify ICRC", true,
  "Compute every packet's ICRC and compare it with the one it carries")
mrc.prefs.trimmed_dscp = Pref.uint("Trimmed DSCP", 27,
  "DSCP a switch sets on a data packet whose payload it cut off")
mrc.prefs.trimmable_dscp = Pref.uint("Trimmable DSCP", 26,
  "DSCP that marks a data packet as trimmable")

-- The IP and UDP headers of this packet, which the ICRC covers and the EV
-- rides in. Field extractors give their place in the frame.
local fx_ip = Field.new("ip")
local fx_ipv6 = Field.new("ipv6")
local fx_udp = Field.new("udp")

local function last(...)
  local all = { ... }
  return all[#all]
end

-- Returns { tvb, ip_off, ip_version, srh_off, udp_off } for the IP header
-- that carries this UDP datagram, or nil.
local function lower_layers()
  local udp = last(fx_udp())
  if not udp then return nil end
  local ip
  for _, fi in pairs({ v4 = last(fx_ip()), v6 = last(fx_ipv6()) }) do
    if fi.offset < udp.offset and (not ip or fi.offset > ip.offset) then ip = fi end
  end
  if not ip then return nil end
  local frame = udp.source
  local l = { tvb = frame, ip_off = ip.offset, udp_off = udp.offset }
  l.ip_version = bit32.rshift(frame(ip.offset, 1):uint(), 4)
  if l.ip_version == 6 and frame(ip.offset + 6, 1):uint() == kIpProtoRouting and
      ip.offset + 44 <= udp.offset and frame(ip.offset + 42, 1):uint() == kSrhRoutingType then
    l.srh_off = ip.offset + 40
  end
  return l
end

local function dscp_of(l)
  if l.ip_version == 4 then return bit32.rshift(l.tvb(l.ip_off + 1, 1):uint(), 2) end
  return bit32.band(bit32.rshift(l.tvb(l.ip_off, 2):uint(), 6), 0x3f)
end

-- CRC-32 (IEEE 802.3, reflected), as lib/wire/icrc.cc computes it.
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit32.band(c, 1) == 1 then
      c = bit32.bxor(bit32.rshift(c, 1), 0xedb88320)
    else
      c = bit32.rshift(c, 1)
    end
  end
  crc_table[i] = c
end

local function crc32_update(crc, bytes)
  for i = 0, bytes:len() - 1 do
    crc = bit32.bxor(crc_table[bit32.band(bit32.bxor(crc, bytes:get_index(i)), 0xff)],
      bit32.rshift(crc, 8))
  end
  return crc
end

local function fill(bytes, from, to, value)
  for i = from, to do bytes:set_index(i, value) end
end

-- The ICRC of the packet whose MRC headers and payload are `mrc_bytes`:
-- 8 bytes of ones (RoCEv2's stand-in for the LRH), then IP [SRH] UDP BTH
-- with the fields switches may rewrite set to ones, then the rest.
local function icrc_of(l, mrc_bytes, srv6)
  local masked = l.tvb(l.ip_off, l.udp_off - l.ip_off + 8):bytes()
  masked:append(mrc_bytes:subset(0, kBthLen))
  if l.ip_version == 4 then
    masked:set_index(1, 0xff)  -- TOS
    masked:set_index(8, 0xff)  -- TTL
    fill(masked, 10, 11, 0xff) -- header checksum
  else
    masked:set_index(0, bit32.bor(masked:get_index(0), 0x0f)) -- traffic class, flow label
    fill(masked, 1, 3, 0xff)
    masked:set_index(7, 0xff) -- hop limit
    if srv6 then
      fill(masked, 24, 39, 0xff) -- uSID forwarding shifts the destination...
      if l.srh_off then fill(masked, 40, l.udp_off - l.ip_off - 1, 0xff) end -- ...and the SRH
    end
  end
  local udp = l.udp_off - l.ip_off
  fill(masked, udp + 6, udp + 7, 0xff) -- UDP checksum
  masked:set_index(udp + 8 + 4, 0xff) -- BTH resv8a

  local crc = crc32_update(0xffffffff, ByteArray.new("ffffffffffffffff"))
  crc = crc32_update(crc, masked)
  crc = crc32_update(crc, mrc_bytes:subset(kBthLen, mrc_bytes:len() - kBthLen))
  return bit32.bnot(crc)
end

local function type_header_len(op)
  if is_data(op) then return kDataHdrLen + (has_imm(op) and kImmLen or 0) end
  if op == 0xd0 or op == 0xd1 then return kFeedbackHdrLen end
  if op == 0xd4 then return kPortStatusHdrLen end
  return kProbeHdrLen
end

local function add_sack(tree, tvb, off)
  local base = tvb(off + 8, 4):uint() % 0x1000000
  local bitmap = tree:add(f.sack_bitmap, tvb(off + 12, 16))
  local acked = 0
  for word = 0, 1 do
    for bit = 0, 63 do
      -- bit i of big-endian word i/64, least significant bit first
      local at = off + 12 + word * 8 + 7 - math.floor(bit / 8)
      if bit32.btest(tvb(at, 1):uint(), bit32.lshift(1, bit % 8)) then
        local psn = (base + word * 64 + bit) % 0x1000000
        bitmap:add(f.sack_psn, tvb(at, 1), psn):set_generated()
        acked = acked + 1
      end
    end
  end
  bitmap:append_text(string.format(" (%d PSNs acknowledged)", acked))
end

local function dissect_data(tree, tvb, off, op, pinfo)
  tree:add(f.va, tvb(off, 8))
  tree:add(f.rkey, tvb(off + 8, 4))
  tree:add(f.msg_len, tvb(off + 12, 4))
  tree:add(f.msn, tvb(off + 16, 4))
  tree:add(f.offset, tvb(off + 20, 4))
  pinfo.cols.info:append(string.format(" MSN=%d off=%d", tvb(off + 16, 4):uint(),
    tvb(off + 20, 4):uint()))
  if has_imm(op) then
    tree:add(f.imm, tvb(off + kDataHdrLen, 4))
    pinfo.cols.info:append(string.format(" imm=0x%08x", tvb(off + kDataHdrLen, 4):uint()))
  end
end

local function dissect_feedback(tree, tvb, off, op, pinfo)
  tree:add(f.cum_psn, tvb(off, 4))
  tree:add(f.ref_psn, tvb(off + 4, 4))
  tree:add(f.sack_base, tvb(off + 8, 4))
  add_sack(tree, tvb, off)
  tree:add(f.echo_tag, tvb(off + 28, 4))
  tree:add(f.service_time_ns, tvb(off + 32, 4))
  tree:add(f.window_mpr, tvb(off + 36, 2))
  tree:add(f.ce_count, tvb(off + 38, 2))
  tree:add(f.nack_code, tvb(off + 40, 1))
  local flags = tree:add(f.fb_flags, tvb(off + 41, 1))
  flags:add(f.fb_ecn_echo, tvb(off + 41, 1))
  flags:add(f.fb_svc_time_valid, tvb(off + 41, 1))
  flags:add(f.fb_duplicate, tvb(off + 41, 1))
  local code = tvb(off + 40, 1):uint()
  pinfo.cols.info:append(string.format(" cum=%d ref=%d", tvb(off, 4):uint() % 0x1000000,
    tvb(off + 4, 4):uint() % 0x1000000))
  if op == 0xd1 then pinfo.cols.info:append(" " .. (nack_names[code] or "unknown")) end
end

local function dissect_probe(tree, tvb, off, pinfo)
  tree:add(f.probe_req_id, tvb(off, 2))
  tree:add(f.probe_port, tvb(off + 2, 1))
  local flags = tree:add(f.probe_flags, tvb(off + 3, 1))
  flags:add(f.probe_svc_time_valid, tvb(off + 3, 1))
  tree:add(f.echo_tag, tvb(off + 4, 4))
  tree:add(f.probe_t_send_ns, tvb(off + 8, 8))
  tree:add(f.service_time_ns, tvb(off + 16, 4))
  pinfo.cols.info:append(string.format(" id=0x%04x", tvb(off, 2):uint()))
end

local function dissect_port_status(tree, tvb, off, pinfo)
  local mask = tvb(off, 4):uint()
  local item = tree:add(f.port_mask, tvb(off, 4))
  local planes = {}
  for n = 0, 31 do
    if bit32.btest(mask, bit32.lshift(1, n)) then
      item:add(f.plane, tvb(off + 3 - math.floor(n / 8), 1), n):set_generated()
      planes[#planes + 1] = tostring(n)
    end
  end
  item:append_text(" (planes " .. (#planes > 0 and table.concat(planes, ",") or "none") .. ")")
  tree:add(f.port_seq, tvb(off + 4, 4))
  tree:add(f.num_planes, tvb(off + 8, 1))
  pinfo.cols.info:append(" planes=" .. (#planes > 0 and table.concat(planes, ",") or "none"))
end

local function add_ev(tree, l, mode)
  if not l then return end
  local t = l.tvb
  local sport = t(l.udp_off, 2)
  if mode == kEvUdp then
    tree:add(f.ev_udp_sport, sport)
  elseif mode == kEvStev then
    if l.ip_version ~= 6 then return end
    local ev = sport:uint() * 0x10000 + t(l.ip_off + 2, 2):uint()
    tree:add(f.ev_stev, sport, ev):append_text(" (flow label low 16 bits in the IPv6 header)")
  elseif l.ip_version == 6 then
    tree:add(f.ev_srv6_dst, t(l.ip_off + 24, 16))
    if l.srh_off then tree:add(f.ev_srv6_segment, t(l.srh_off + 8, 16)) end
  end
end

-- The payload and ICRC after the headers that end at `hdr_end`.
local function dissect_tail(tree, tvb, hdr_end, op, l, trimmed, pinfo)
  local reported = tvb:reported_len()
  if trimmed then
    tree:add(f.icrc_status, tvb(0, 0), kIcrcAbsent):set_generated()
    if is_data(op) then tree:add(f.payload_len, tvb(0, 0), 0):set_generated() end
    if reported > hdr_end then
      tree:add_proto_expert_info(ef.stray_bytes,
        string.format("Trimmed packet carries %d bytes after its headers", reported - hdr_end))
    end
    return
  end
  if reported < hdr_end + kIcrcLen then
    tree:add_proto_expert_info(ef.truncated, "Packet ends before its ICRC")
    return
  end
  local payload_len = reported - hdr_end - kIcrcLen
  if is_data(op) then
    tree:add(f.payload_len, tvb(0, 0), payload_len):set_generated()
    if payload_len > 0 then tree:add(f.payload, tvb(hdr_end, payload_len)) end
    pinfo.cols.info:append(string.format(" len=%d", payload_len))
  elseif payload_len > 0 then
    tree:add_proto_expert_info(ef.stray_bytes,
      string.format("%d bytes between the headers and the ICRC", payload_len))
  end
  if tvb:len() < reported or not l or not mrc.prefs.verify_icrc then
    tree:add(f.icrc_status, tvb(0, 0), kIcrcUnverified):set_generated()
    return
  end
  local icrc_range = tvb(reported - kIcrcLen, kIcrcLen)
  local icrc_item = tree:add(f.icrc, icrc_range)
  local want = icrc_range:uint()
  local got = icrc_of(l, tvb(0, reported - kIcrcLen):bytes(), mrc.prefs.ev_mode == kEvSrv6)
  if want == got then
    tree:add(f.icrc_status, icrc_range, kIcrcGood):set_generated()
  else
    tree:add(f.icrc_status, icrc_range, kIcrcBad):set_generated()
    tree:add(f.icrc_calc, icrc_range, got):set_generated()
    icrc_item:add_proto_expert_info(ef.bad_icrc,
      string.format("ICRC 0x%08x does not match the computed 0x%08x", want, got))
  end
end

local roce = DissectorTable.get("udp.port"):get_dissector(4791)

function mrc.dissector(tvb, pinfo, tree)
  local op = tvb:len() > 0 and tvb(0, 1):uint() or nil
  if not op or op < kFirstMrcOpcode or op > kLastMrcOpcode then
    if roce then return roce:call(tvb, pinfo, tree) end
    return 0
  end
  pinfo.cols.protocol = "softmrc"
  local root = tree:add(mrc, tvb())
  local captured = tvb:len()
  local name = opcode_names[op]
  pinfo.cols.info = name or string.format("opcode 0x%02x", op)

  local l = lower_layers()
  local trimmed = false
  if l then
    local dscp = dscp_of(l)
    trimmed = dscp == mrc.prefs.trimmed_dscp
    root:add(f.trimmed, tvb(0, 0), trimmed):set_generated()
    if is_data(op) then
      root:add(f.trimmable, tvb(0, 0), dscp == mrc.prefs.trimmable_dscp):set_generated()
    end
    if trimmed then
      root:add_proto_expert_info(is_data(op) and ef.trimmed or ef.trimmed_not_data)
      pinfo.cols.info:append(" [trimmed]")
    end
  end

  if captured < kBthLen then
    root:add_proto_expert_info(ef.truncated, "Packet ends inside the BTH")
    return captured
  end
  local bth = root:add(tvb(0, kBthLen), "Base Transport Header")
  bth:add(f.opcode, tvb(0, 1))
  bth:add(f.se, tvb(1, 1))
  bth:add(f.tver, tvb(1, 1))
  bth:add(f.pkey, tvb(2, 2))
  bth:add(f.dest_qpn, tvb(5, 3))
  bth:add(f.ack_req, tvb(8, 1))
  bth:add(f.psn, tvb(9, 3))
  pinfo.cols.info:append(string.format(" QP=0x%06x PSN=%d", tvb(5, 3):uint(), tvb(9, 3):uint()))
  if not name then
    root:add_proto_expert_info(ef.unknown_opcode)
    return captured
  end

  if captured < kBaseLen then
    root:add_proto_expert_info(ef.truncated, "Packet ends inside the MTH")
    return captured
  end
  local mth = root:add(tvb(kBthLen, kMthLen), "MRC Transport Header")
  mth:add(f.version, tvb(kBthLen, 1))
  local flags = mth:add(f.mth_flags, tvb(kBthLen + 1, 1))
  flags:add(f.mth_retransmit, tvb(kBthLen + 1, 1))
  mth:add(f.path_tag, tvb(kBthLen + 4, 4))
  add_ev(root:add(tvb(0, 0),
    "Entropy value (" .. ev_mode_names[mrc.prefs.ev_mode] .. " mode)"), l, mrc.prefs.ev_mode)
  local version = tvb(kBthLen, 1):uint()
  if version ~= kVersion then
    mth:add_proto_expert_info(ef.unknown_version,
      string.format("MTH version %d; this dissector speaks version %d", version, kVersion))
    return captured
  end

  local type_len = type_header_len(op)
  local hdr_len = kBaseLen + type_len
  if captured < hdr_len then
    root:add_proto_expert_info(ef.truncated,
      string.format("%d bytes captured of %d bytes of MRC headers", captured, hdr_len))
    if tvb:reported_len() >= hdr_len then
      root:add(f.icrc_status, tvb(0, 0), kIcrcUnverified):set_generated()
    end
    return captured
  end
  local off = kBaseLen
  if is_data(op) then
    dissect_data(root:add(tvb(off, type_len), "Data Header"), tvb, off, op, pinfo)
  elseif op == 0xd0 or op == 0xd1 then
    dissect_feedback(root:add(tvb(off, type_len), "Feedback Header"), tvb, off, op, pinfo)
  elseif op == 0xd4 then
    dissect_port_status(root:add(tvb(off, type_len), "Port Status Header"), tvb, off, pinfo)
  else
    dissect_probe(root:add(tvb(off, type_len), "Probe Header"), tvb, off, pinfo)
  end
  dissect_tail(root, tvb, hdr_len, op, l, trimmed, pinfo)
  return captured
end

DissectorTable.get("udp.port"):add(4791, mrc)
