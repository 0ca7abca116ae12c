// The controller's profile rules: every move of the life cycle, each
// refused move with its documented code, and the state file round trip.
#include "control/profiles.h"

#include <gtest/gtest.h>

namespace softmrc::control {
namespace {

DeviceLimits limits() {
  DeviceLimits l;
  l.max_fmt_profiles = 4;
  l.max_ev_profiles = 4;
  l.max_cc_profiles = 4;
  l.max_evs_per_profile = 64;
  l.num_ports = 2;
  return l;
}

wire::EvField field16() {
  return wire::EvField{.width = 16, .init_val = 0, .min_val = 0, .max_val = 0xffff, .mask = 0xffff};
}

wire::EvValue value16(uint16_t v) {
  wire::EvValue x;
  x.bytes[0] = static_cast<uint8_t>(v >> 8);
  x.bytes[1] = static_cast<uint8_t>(v);
  return x;
}

// A registry with ONLINE UDP format 1.
class ProfilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uint64_t id = 0;
    ASSERT_TRUE(r.create_fmt(1, &id).ok());
    ASSERT_TRUE(
        r.modify_fmt(1, {wire::EvMode::kUdp, std::vector<uint32_t>{16}, ProfileState::kOffline})
            .ok());
    ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kOnline}).ok());
  }
  // An explicit EV profile of `count` EVs, OFFLINE.
  uint64_t explicit_offline(uint32_t count) {
    uint64_t id = 0;
    EXPECT_TRUE(r.create_ev(0, &id).ok());
    EvProfileChange c;
    c.mode = EvProfileMode::kExplicit;
    c.fmt_id = 1;
    c.count = count;
    c.fields = std::vector<wire::EvField>{field16()};
    c.state = ProfileState::kOffline;
    const Result res = r.modify_ev(id, c);
    EXPECT_TRUE(res.ok()) << res.message;
    return id;
  }
  uint64_t explicit_online(uint32_t count) {
    const uint64_t id = explicit_offline(count);
    for (uint32_t i = 0; i < count; ++i)
      EXPECT_TRUE(
          r.replace_ev(id, i, value16(static_cast<uint16_t>(0xc000 + i)), uint8_t(i % 2 + 1)).ok());
    EXPECT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).ok());
    return id;
  }

  Registry r{limits()};
};

TEST_F(ProfilesTest, FormatLifeCycleAllFourMoves) {
  EXPECT_EQ(r.fmt(1)->state, ProfileState::kOnline);
  ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kOffline}).ok());
  ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kInit}).ok());
  EXPECT_EQ(r.fmt(1)->state, ProfileState::kInit);
  EXPECT_FALSE(r.fmt(1)->mode.has_value());  // INIT forgets the configuration
}

TEST_F(ProfilesTest, FormatRefusedMoves) {
  uint64_t id = 0;
  ASSERT_TRUE(r.create_fmt(2, &id).ok());
  EXPECT_EQ(r.modify_fmt(2, {{}, {}, ProfileState::kOnline}).code, Err::kInval);   // INIT -> ONLINE
  EXPECT_EQ(r.modify_fmt(2, {{}, {}, ProfileState::kOffline}).code, Err::kInval);  // no mode
  ASSERT_TRUE(r.modify_fmt(2, {wire::EvMode::kStev, {}, ProfileState::kOffline}).ok());
  EXPECT_EQ(r.modify_fmt(2, {{}, {}, ProfileState::kOnline}).code, Err::kInval);  // no fields
  EXPECT_EQ(r.modify_fmt(2, {{}, std::vector<uint32_t>{32, 8}, ProfileState::kOnline}).code,
            Err::kTooBig);                             // 40 bits > STEV's 32
  EXPECT_EQ(r.fmt(2)->state, ProfileState::kOffline);  // all or nothing
  ASSERT_TRUE(r.modify_fmt(2, {{}, std::vector<uint32_t>{16, 16}, ProfileState::kOnline}).ok());
  EXPECT_EQ(r.modify_fmt(2, {{}, {}, ProfileState::kInit}).code, Err::kInval);  // ONLINE -> INIT
  EXPECT_EQ(r.modify_fmt(2, {wire::EvMode::kUdp, {}, {}}).code, Err::kBusy);    // ONLINE attrs
  EXPECT_EQ(r.modify_fmt(9, {{}, {}, ProfileState::kOffline}).code, Err::kNoent);
  EXPECT_EQ(r.create_fmt(2, &id).code, Err::kExist);
}

// softmrcd appends the destination's uSID to an SRv6 path and sends no
// SRH, so a path leaves the address's last 16 bits free.
TEST_F(ProfilesTest, Srv6FormatGoesOnlineIfTheDestinationStillFits) {
  // The address and the SRH's segment, each a block and six uSIDs.
  const std::vector<uint32_t> two_containers{32, 16, 16, 16, 16, 16, 16,
                                             32, 16, 16, 16, 16, 16, 16};
  uint64_t fits = 0, wide = 0;
  ASSERT_TRUE(r.create_fmt(0, &fits).ok());
  ASSERT_TRUE(r.modify_fmt(fits, {wire::EvMode::kSrv6, std::vector<uint32_t>{32, 16, 16, 16, 16},
                                  ProfileState::kOffline})
                  .ok());
  EXPECT_TRUE(r.modify_fmt(fits, {{}, {}, ProfileState::kOnline}).ok());
  ASSERT_TRUE(r.create_fmt(0, &wide).ok());
  ASSERT_TRUE(r.modify_fmt(wide, {wire::EvMode::kSrv6, two_containers, ProfileState::kOffline})
                  .ok());  // valid: 256 bits fit the address and the SRH
  const Result res = r.modify_fmt(wide, {{}, {}, ProfileState::kOnline});
  EXPECT_EQ(res.code, Err::kNotSup);
  EXPECT_NE(res.message.find("at most 240"), std::string::npos) << res.message;
  std::vector<uint32_t> less_one(two_containers.begin(), two_containers.end() - 1);
  EXPECT_TRUE(r.modify_fmt(wide, {{}, less_one, ProfileState::kOnline})
                  .ok());  // 240 bits: the last uSID is the destination's
}

TEST_F(ProfilesTest, FormatBusyWhileAnOnlineEvProfileUsesIt) {
  const uint64_t ev = explicit_online(2);
  EXPECT_EQ(r.modify_fmt(1, {{}, {}, ProfileState::kOffline}).code, Err::kBusy);
  EXPECT_EQ(r.destroy_fmt(1).code, Err::kBusy);
  ASSERT_TRUE(r.modify_ev(ev, EvProfileChange{.state = ProfileState::kOffline}).ok());
  EXPECT_EQ(r.destroy_fmt(1).code, Err::kBusy);  // still referenced
  ASSERT_TRUE(r.destroy_ev(ev).ok());
  EXPECT_EQ(r.destroy_fmt(1).code, Err::kBusy);  // ONLINE itself
  ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kOffline}).ok());
  EXPECT_TRUE(r.destroy_fmt(1).ok());
}

// A format may change while an EV profile using it is OFFLINE; going
// ONLINE, the profile is checked against the format as it is now (else a
// state file could hold what no registry accepts at load).
TEST_F(ProfilesTest, EvProfileOnlineRechecksAFormatChangedMeanwhile) {
  const uint64_t ev = explicit_offline(2);
  for (uint32_t i = 0; i < 2; ++i)
    ASSERT_TRUE(r.replace_ev(ev, i, value16(static_cast<uint16_t>(0xc000 + i)), 1).ok());
  ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kOffline}).ok());
  ASSERT_TRUE(r.modify_fmt(1, {{}, std::vector<uint32_t>{8}, ProfileState::kOnline}).ok());
  const Result res = r.modify_ev(ev, EvProfileChange{.state = ProfileState::kOnline});
  EXPECT_FALSE(res.ok());
  EXPECT_NE(res.message.find("EV profile"), std::string::npos) << res.message;
  EXPECT_EQ(r.ev(ev)->state, ProfileState::kOffline);
  // Back to 16 bits, the array is what the format makes again.
  ASSERT_TRUE(r.modify_fmt(1, {{}, {}, ProfileState::kOffline}).ok());
  ASSERT_TRUE(r.modify_fmt(1, {{}, std::vector<uint32_t>{16}, ProfileState::kOnline}).ok());
  EXPECT_TRUE(r.modify_ev(ev, EvProfileChange{.state = ProfileState::kOnline}).ok());
}

TEST(ProfileNumbers, DecimalOrHexOnly) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_number("010", UINT64_MAX, &v));
  EXPECT_EQ(v, 10u);  // not octal
  EXPECT_TRUE(parse_number("0x1F", UINT64_MAX, &v));
  EXPECT_EQ(v, 31u);
  EXPECT_TRUE(parse_number("18446744073709551615", UINT64_MAX, &v));
  EXPECT_EQ(v, UINT64_MAX);
  for (const char* bad :
       {"", "09x", "0x", "0xg", "-1", "+1", " 1", "1 ", "18446744073709551616", "1e3"})
    EXPECT_FALSE(parse_number(bad, UINT64_MAX, &v)) << bad;
  EXPECT_FALSE(parse_number("256", 255, &v));
}

TEST_F(ProfilesTest, ExplicitProfileNeedsEveryEvBeforeOnline) {
  const uint64_t id = explicit_offline(3);
  ASSERT_EQ(r.ev(id)->evs.size(), 3u);
  EXPECT_EQ(r.ev(id)->evs[0].port, 0);  // unpopulated
  EXPECT_TRUE(r.replace_ev(id, 0, value16(0xc000), 1).ok());
  EXPECT_TRUE(r.replace_ev(id, 1, value16(0xc001), 2).ok());
  Result res = r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline});
  EXPECT_EQ(res.code, Err::kInval);
  EXPECT_NE(res.message.find("EV 2 is unpopulated"), std::string::npos) << res.message;
  EXPECT_EQ(r.replace_ev(id, 3, value16(1), 1).code, Err::kInval);  // index >= count
  EXPECT_EQ(r.replace_ev(id, 2, value16(1), 3).code, Err::kInval);  // port 3 of 2
  wire::EvValue wide = value16(1);
  wide.bytes[2] = 1;  // bits past the 16 the field consumes
  EXPECT_EQ(r.replace_ev(id, 2, wide, 1).code, Err::kInval);
  EXPECT_TRUE(r.replace_ev(id, 2, value16(0xc002), 1).ok());
  EXPECT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).ok());
  EXPECT_EQ(r.replace_ev(id, 0, value16(5), 1).code, Err::kBusy);  // ONLINE
  std::vector<engine::EvEntry> evs;
  ASSERT_TRUE(r.qp_evs(id, &evs).ok());
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[1].value.bytes[0], 0xc0);
  EXPECT_EQ(evs[1].value.bytes[1], 0x01);
  EXPECT_EQ(evs[1].plane, 1);
}

TEST_F(ProfilesTest, EvProfileRefusedMoves) {
  uint64_t id = 0;
  ASSERT_TRUE(r.create_ev(0, &id).ok());
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).code, Err::kInval);
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}).code, Err::kInval);
  EvProfileChange c{.mode = EvProfileMode::kExplicit, .state = ProfileState::kOffline};
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kInval);  // no format
  c.fmt_id = 7;
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kNoent);  // no such format
  c.fmt_id = 1;
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kInval);  // no count
  c.count = 65;
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kTooBig);  // above the device's 64
  c.count = 4;
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kInval);  // no fields
  c.fields = std::vector<wire::EvField>{field16(), field16()};
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kTooBig);  // two fields, the format has one
  c.fields = std::vector<wire::EvField>{{.width = 16, .init_val = 0x10000}};
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kInval);  // init wider than the field
  c.fields = std::vector<wire::EvField>{field16()};
  c.event_mask = 8;
  EXPECT_EQ(r.modify_ev(id, c).code, Err::kInval);
  c.event_mask.reset();
  c.min_active = 5;
  ASSERT_TRUE(r.modify_ev(id, c).ok());
  EXPECT_EQ(r.ev(id)->state, ProfileState::kOffline);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(r.replace_ev(id, i, value16(uint16_t(i)), 1).ok());
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).code,
            Err::kInval);  // min_active 5 > count 4
  ASSERT_TRUE(
      r.modify_ev(id, EvProfileChange{.min_active = 2, .state = ProfileState::kOnline}).ok());
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kInit}).code, Err::kInval);
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.min_active = 1}).code, Err::kBusy);
  EXPECT_EQ(r.destroy_ev(id).code, Err::kBusy);
  ASSERT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}).ok());
  ASSERT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kInit}).ok());
  EXPECT_FALSE(r.ev(id)->mode.has_value());
  EXPECT_TRUE(r.destroy_ev(id).ok());
}

TEST_F(ProfilesTest, AutoModeIsRefusedOnline) {
  uint64_t id = 0;
  ASSERT_TRUE(r.create_ev(0, &id).ok());
  ASSERT_TRUE(r.modify_ev(id, EvProfileChange{.mode = EvProfileMode::kAuto,
                                              .state = ProfileState::kOffline})
                  .ok());
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).code, Err::kNotSup);
}

TEST_F(ProfilesTest, AttachedQpsMakeItBusy) {
  const uint64_t id = explicit_online(2);
  uint64_t off = explicit_offline(2);
  EXPECT_EQ(r.attach(off, 0).code, Err::kInval);  // not ONLINE
  EXPECT_EQ(r.attach(42, 0).code, Err::kNoent);
  ASSERT_TRUE(r.attach(id, 0).ok());
  EXPECT_EQ(r.ev(id)->attached, 1u);
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}).code, Err::kBusy);
  r.detach(id, 0);
  EXPECT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}).ok());
}

TEST_F(ProfilesTest, GeneratedProfileFillsEveryPort) {
  uint64_t id = 0;
  ASSERT_TRUE(r.create_ev(0, &id).ok());
  EvProfileChange c;
  c.mode = EvProfileMode::kGenerated;
  c.fmt_id = 1;
  c.count = 8;
  c.fields = std::vector<wire::EvField>{
      {.width = 16, .init_val = 0xc000, .min_val = 0, .max_val = 3, .mask = 0x3}};
  c.state = ProfileState::kOffline;
  ASSERT_TRUE(r.modify_ev(id, c).ok());
  const EvProfile& p = *r.ev(id);
  ASSERT_EQ(p.evs.size(), 8u);
  EXPECT_EQ(p.evs[0].port, 1);
  EXPECT_EQ(p.evs[1].port, 2);
  EXPECT_EQ(p.evs[7].value.bytes[0] >> 6, 3);  // generated value 3 on port 2
  ASSERT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}).ok());
  // 4 values x 2 ports cannot give 9 EVs.
  ASSERT_TRUE(r.modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}).ok());
  EXPECT_EQ(r.modify_ev(id, EvProfileChange{.count = 9}).code, Err::kInval);
}

TEST_F(ProfilesTest, EvStateGoodOrDeniedOnly) {
  const uint64_t id = explicit_online(2);
  std::vector<uint32_t> m;
  EXPECT_TRUE(r.set_ev_state(id, value16(0xc001), 2, engine::EvState::kDenied, &m).ok());
  EXPECT_EQ(m, std::vector<uint32_t>{1});
  EXPECT_EQ(r.ev(id)->evs[1].state, engine::EvState::kDenied);
  EXPECT_EQ(r.set_ev_state(id, value16(0xc001), 1, engine::EvState::kDenied, &m).code, Err::kNoent);
  EXPECT_EQ(r.set_ev_state(id, value16(0xc001), 2, engine::EvState::kAssumedBad, &m).code,
            Err::kInval);
  EXPECT_TRUE(r.set_ev_state(id, value16(0xc001), 2, engine::EvState::kGood, &m).ok());
}

TEST_F(ProfilesTest, CcLifeCycle) {
  uint64_t id = 0;
  ASSERT_TRUE(r.create_cc(0, &id).ok());
  EXPECT_EQ(r.modify_cc(id, {{}, {}, ProfileState::kOffline}).code, Err::kInval);  // no algorithm
  ASSERT_TRUE(r.modify_cc(id, {engine::CcAlgorithm::kNscc, {}, ProfileState::kOffline}).ok());
  EXPECT_EQ(r.modify_cc(id, {{}, {}, ProfileState::kOnline}).code, Err::kInval);  // no config
  engine::NsccParams bad{};
  EXPECT_EQ(r.modify_cc(id, {{}, bad, ProfileState::kOnline}).code, Err::kInval);  // validate()
  const engine::NsccParams good = engine::default_nscc_params(100'000'000'000, 10'000, 4096);
  ASSERT_TRUE(r.modify_cc(id, {{}, good, ProfileState::kOnline}).ok());
  EXPECT_EQ(r.modify_cc(id, {engine::CcAlgorithm::kNone, {}, {}}).code, Err::kBusy);
  ASSERT_TRUE(r.attach(0, id).ok());
  EXPECT_EQ(r.modify_cc(id, {{}, {}, ProfileState::kOffline}).code, Err::kBusy);
  r.detach(0, id);
  ASSERT_TRUE(r.modify_cc(id, {{}, {}, ProfileState::kOffline}).ok());
  EXPECT_TRUE(r.destroy_cc(id).ok());
  uint64_t none = 0;
  ASSERT_TRUE(r.create_cc(0, &none).ok());
  EXPECT_TRUE(r.modify_cc(none, {engine::CcAlgorithm::kNone, {}, ProfileState::kOffline}).ok());
  EXPECT_TRUE(r.modify_cc(none, {{}, {}, ProfileState::kOnline}).ok());  // none needs no config
}

TEST_F(ProfilesTest, NsccParametersByName) {
  engine::NsccParams n{};
  EXPECT_TRUE(set_nscc_param(&n, "gamma", "0.8").ok());
  EXPECT_EQ(n.gamma, 0.8);
  EXPECT_TRUE(set_nscc_param(&n, "base_rtt_ns", "12000").ok());
  EXPECT_EQ(n.base_rtt_ns, 12000u);
  EXPECT_EQ(set_nscc_param(&n, "base_rtt_ns", "1.5").code, Err::kInval);
  EXPECT_EQ(set_nscc_param(&n, "gamma", "-1").code, Err::kInval);
  EXPECT_EQ(set_nscc_param(&n, "colour", "1").code, Err::kInval);
}

TEST_F(ProfilesTest, DeclaredProfilesAreChangedInTheFile) {
  EvProfile p;
  p.id = 3;
  p.name = "default";
  p.mode = EvProfileMode::kExplicit;
  p.fmt_id = 1;
  p.count = 1;
  p.fields = {field16()};
  p.evs = {EvSlot{value16(0xc000), 1, engine::EvState::kGood}};
  ASSERT_TRUE(r.declare_ev(p).ok());
  EXPECT_EQ(r.ev(3)->state, ProfileState::kOnline);
  EXPECT_EQ(r.modify_ev(3, EvProfileChange{.state = ProfileState::kOffline}).code, Err::kPerm);
  EXPECT_EQ(r.destroy_ev(3).code, Err::kPerm);
  std::vector<uint32_t> m;
  EXPECT_TRUE(r.set_ev_state(3, value16(0xc000), 1, engine::EvState::kDenied, &m).ok());
}

TEST_F(ProfilesTest, LimitsOnTheNumberOfProfiles) {
  uint64_t id = 0;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.create_ev(0, &id).ok());
  EXPECT_EQ(r.create_ev(0, &id).code, Err::kNoSpc);
}

TEST_F(ProfilesTest, StateFileRoundTrip) {
  const uint64_t a = explicit_online(2);
  std::vector<uint32_t> m;
  ASSERT_TRUE(r.set_ev_state(a, value16(0xc001), 2, engine::EvState::kDenied, &m).ok());
  const uint64_t b = explicit_offline(2);
  uint64_t cc = 0;
  ASSERT_TRUE(r.create_cc(0, &cc).ok());
  ASSERT_TRUE(r.modify_cc(cc, {engine::CcAlgorithm::kNscc,
                               engine::default_nscc_params(100'000'000'000, 10'000, 4096),
                               ProfileState::kOffline})
                  .ok());
  ASSERT_TRUE(r.modify_cc(cc, {{}, {}, ProfileState::kOnline}).ok());
  const std::string text = r.to_json().dump();

  Json j;
  std::string err;
  ASSERT_TRUE(parse_json(text, &j, &err)) << err;
  Registry back{limits()};
  const Result res = back.restore(j);
  ASSERT_TRUE(res.ok()) << res.message;
  EXPECT_EQ(back.to_json().dump(), text);
  EXPECT_EQ(back.ev(a)->state, ProfileState::kOnline);
  EXPECT_EQ(back.ev(a)->evs[1].state, engine::EvState::kDenied);
  EXPECT_EQ(back.ev(b)->state, ProfileState::kOffline);
  EXPECT_EQ(back.cc(cc)->config->gamma, r.cc(cc)->config->gamma);

  // A file that breaks a rule is refused with that rule's message.
  ASSERT_TRUE(parse_json(
      R"({"fmt_profiles":[],"ev_profiles":[{"id":1,"state":"ONLINE"}],"cc_profiles":[]})", &j,
      &err));
  Registry other{limits()};
  EXPECT_EQ(other.restore(j).code, Err::kInval);
}

}  // namespace
}  // namespace softmrc::control
