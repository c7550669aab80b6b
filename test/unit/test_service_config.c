/* Unit tests for service_config/ (SPEC SC-01..SC-12, DNS-02..DNS-04).
 *
 * JSON in the tables is written with single quotes for readability; q()
 * turns them into double quotes before parsing (no test string needs a
 * literal apostrophe). */
#include "service_config/service_config.h"

#include "test/harness.h"

#include <stdlib.h>

/* ---- helpers ---- */

/* Copy |s| into |dst| with ' turned into ". */
static char *qinto(char *dst, size_t size, const char *s) {
  size_t i = 0;
  for (; s[i] && i + 1 < size; i++)
    dst[i] = s[i] == '\'' ? '"' : s[i];
  dst[i] = '\0';
  return dst;
}

static char qbuf[8192];

static const char *q(const char *s) {
  return qinto(qbuf, sizeof(qbuf), s);
}

static grit_svccfg *parse_q(const char *json, uint32_t cap,
                            grit_error_detail *d) {
  const char *j = q(json);
  grit_svccfg_opts o = {.max_attempts_cap = cap};
  return grit_svccfg_parse(j, strlen(j), &o, d);
}

/* A retry policy with one field replaced or added, for compact rows. */
#define RP(extra)                                                              \
  "{'methodConfig':[{'name':[{'service':'S'}],'retryPolicy':{" extra "}}]}"
#define RP_BASE                                                                \
  "'maxAttempts':3,'initialBackoff':'0.1s','maxBackoff':'1s',"                 \
  "'backoffMultiplier':2"
#define RP_CODES "'retryableStatusCodes':['UNAVAILABLE']"
#define MC(extra) "{'methodConfig':[{'name':[{'service':'S'}]," extra "}]}"
#define HP(extra) MC("'hedgingPolicy':{" extra "}")
#define TT(extra) "{'retryThrottling':{" extra "}}"
#define LBC(extra) "{'loadBalancingConfig':" extra "}"

/* What a valid row checks on the parsed config, for method "/S/M". */
typedef enum probe {
  P_NONE,
  P_NO_METHOD, /* find("/S/M") is NULL */
  P_TIMEOUT,   /* timeout_ns */
  P_WFR,       /* wait_for_ready enum */
  P_REQ_BYTES, /* max_request_bytes */
  P_RETRY_ATTEMPTS,
  P_RETRY_CODES, /* mask */
  P_RETRY_MULT_X1000,
  P_RECV_TIMEOUT, /* per_attempt_recv_timeout_ns */
  P_HEDGE_ATTEMPTS,
  P_HEDGE_DELAY,
  P_HEDGE_CODES,
  P_MAX_TOKENS, /* max_tokens_milli */
  P_RATIO,      /* token_ratio_milli */
  P_LB,         /* grit_svccfg_lb */
  P_SHUFFLE,    /* shuffle_address_list */
  P_NO_THROTTLE,
} probe;

typedef struct row {
  const char *rule; /* the SPEC rule exercised */
  uint32_t cap;     /* max_attempts_cap (0: default 5) */
  const char *json;
  bool ok;
  const char *path;   /* invalid: exact path of the first problem */
  const char *reason; /* invalid: substring of the reason */
  probe probe;        /* valid: what to check */
  int64_t value;
} row;

#define OK(rule, json)                                                         \
  { rule, 0, json, true, NULL, NULL, P_NONE, 0 }
#define OKP(rule, json, probe, value)                                          \
  { rule, 0, json, true, NULL, NULL, probe, value }
#define OKC(rule, cap, json, probe, value)                                     \
  { rule, cap, json, true, NULL, NULL, probe, value }
#define BAD(rule, json, path, reason)                                          \
  { rule, 0, json, false, path, reason, P_NONE, 0 }

#define B(c) GRIT_CODE_BIT(GRIT_STATUS_##c)

static const row rows[] = {
    /* SC-01: top level, unknown fields, null as absent */
    OK("SC-01", "{}"),
    BAD("SC-01", "[]", "$", "must be a JSON object"),
    BAD("SC-01", "5", "$", "must be a JSON object"),
    BAD("SC-01", "'x'", "$", "must be a JSON object"),
    BAD("SC-01", "null", "$", "must be a JSON object"),
    BAD("SC-01", "{", "$", "invalid JSON"),
    BAD("SC-01", "", "$", "invalid JSON"),
    BAD("SC-01", "{} {}", "$", "invalid JSON"),
    BAD("SC-01", "{'methodConfig':[],'methodConfig':[]}", "$", "duplicate"),
    OK("SC-01",
       "{'foo':1,'methodConfig':[{'name':[{'service':'S','bar':2}],'baz':{},"
       "'retryPolicy':{" RP_BASE "," RP_CODES ",'x':null}}],"
       "'retryThrottling':{'maxTokens':1,'tokenRatio':1,'y':[]},"
       "'loadBalancingConfig':[{'pick_first':{'z':1}}]}"),
    OKP("SC-01",
        "{'methodConfig':null,'retryThrottling':null,"
        "'loadBalancingConfig':null,'loadBalancingPolicy':null}",
        P_NO_THROTTLE, 0),
    OKP("SC-01",
        MC("'timeout':null,'waitForReady':null,'retryPolicy':null,"
           "'hedgingPolicy':null,'maxRequestMessageBytes':null"),
        P_WFR, GRIT_WFR_UNSET),
    OKP("SC-01",
        RP(RP_BASE ",'retryableStatusCodes':[14],"
                   "'perAttemptRecvTimeout':null"),
        P_RECV_TIMEOUT, 0),
    BAD("SC-01", "{'methodConfig':{}}", "$.methodConfig", "must be an array"),
    BAD("SC-01", "{'methodConfig':[5]}", "$.methodConfig[0]",
        "must be an object"),
    BAD("SC-01", "{'methodConfig':'x'}", "$.methodConfig", "must be an array"),

    /* SC-02: the first problem, with its path */
    BAD("SC-02",
        "{'methodConfig':[{'name':[{'service':'S'}],'timeout':'1'},"
        "{'name':[{'service':'T'}],'timeout':'x'}]}",
        "$.methodConfig[0].timeout", "'s'"),
    BAD("SC-02", RP(RP_BASE ",'retryableStatusCodes':['UNAVAILABLE',99]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[1]", "0..16"),

    /* SC-04: names */
    OKP("SC-04", "{'methodConfig':[{'timeout':'1s'}]}", P_NO_METHOD, 0),
    OKP("SC-04", "{'methodConfig':[{'name':[],'timeout':'1s'}]}", P_NO_METHOD,
        0),
    OKP("SC-04", "{'methodConfig':[{'name':null,'timeout':'1s'}]}", P_NO_METHOD,
        0),
    BAD("SC-04", "{'methodConfig':[{'timeout':'1'}]}",
        "$.methodConfig[0].timeout", "'s'"),
    BAD("SC-04", "{'methodConfig':[{'name':[{'method':'M'}]}]}",
        "$.methodConfig[0].name[0]", "needs a service"),
    BAD("SC-04", "{'methodConfig':[{'name':[{'service':'','method':'M'}]}]}",
        "$.methodConfig[0].name[0]", "needs a service"),
    BAD("SC-04",
        "{'methodConfig':[{'name':[{'service':'S','method':'M'},"
        "{'service':'S','method':'M'}]}]}",
        "$.methodConfig[0].name[1]", "duplicate name \"/S/M\""),
    BAD("SC-04",
        "{'methodConfig':[{'name':[{'service':'S'}]},"
        "{'name':[{'service':'T'},{'service':'S'}]}]}",
        "$.methodConfig[1].name[1]", "first at $.methodConfig[0].name[0]"),
    BAD("SC-04", "{'methodConfig':[{'name':[{}]},{'name':[{}]}]}",
        "$.methodConfig[1].name[0]", "second default"),
    BAD("SC-04", "{'methodConfig':[{'name':[{},{'service':''}]}]}",
        "$.methodConfig[0].name[1]", "second default"),
    BAD("SC-04",
        "{'methodConfig':[{'name':[{'service':'S'}]},"
        "{'name':[{'service':'S','method':''}]}]}",
        "$.methodConfig[1].name[0]", "duplicate name \"/S/*\""),
    BAD("SC-04", "{'methodConfig':[{'name':{}}]}", "$.methodConfig[0].name",
        "must be an array"),
    BAD("SC-04", "{'methodConfig':[{'name':[5]}]}", "$.methodConfig[0].name[0]",
        "must be an object"),
    BAD("SC-04", "{'methodConfig':[{'name':[null]}]}",
        "$.methodConfig[0].name[0]", "must be an object"),
    BAD("SC-04", "{'methodConfig':[{'name':[{'service':5}]}]}",
        "$.methodConfig[0].name[0].service", "must be a string"),
    BAD("SC-04", "{'methodConfig':[{'name':[{'service':'S','method':true}]}]}",
        "$.methodConfig[0].name[0].method", "must be a string"),
    OKP("SC-04",
        "{'methodConfig':[{'name':[{'service':'S','method':'M'}],"
        "'timeout':'1s'},{'name':[{'service':'S'}],'timeout':'2s'},"
        "{'name':[{'service':'s','method':'M'}],'timeout':'3s'}]}",
        P_TIMEOUT, 1000000000),
    OKP("SC-04",
        "{'methodConfig':[{'name':[{'service':'S','method':'N'}],"
        "'timeout':'1s'},{'name':[{'service':'S'}],'timeout':'2s'}]}",
        P_TIMEOUT, 2000000000),
    OKP("SC-04",
        "{'methodConfig':[{'name':[{'service':'T'}],'timeout':'1s'},"
        "{'name':[{}],'timeout':'4s'}]}",
        P_TIMEOUT, 4000000000),
    OKP("SC-04", "{'methodConfig':[{'name':[{'service':'S','method':'m'}]}]}",
        P_NO_METHOD, 0),

    /* SC-06: durations, through timeout */
    OKP("SC-06", MC("'timeout':'1s'"), P_TIMEOUT, 1000000000),
    OKP("SC-06", MC("'timeout':'0.5s'"), P_TIMEOUT, 500000000),
    OKP("SC-06", MC("'timeout':'1.000000001s'"), P_TIMEOUT, 1000000001),
    OKP("SC-06", MC("'timeout':'0s'"), P_TIMEOUT, 0),
    OKP("SC-06", MC("'timeout':'0.000000001s'"), P_TIMEOUT, 1),
    OKP("SC-06", MC("'timeout':'315576000000s'"), P_TIMEOUT, INT64_MAX),
    OKP("SC-06", MC("'timeout':'9223372036.854775807s'"), P_TIMEOUT, INT64_MAX),
    OKP("SC-06", MC("'timeout':'9223372036.854775806s'"), P_TIMEOUT,
        INT64_MAX - 1),
    BAD("SC-06", MC("'timeout':'.5s'"), "$.methodConfig[0].timeout",
        "must start with a digit"),
    BAD("SC-06", MC("'timeout':'1'"), "$.methodConfig[0].timeout",
        "ending in 's'"),
    BAD("SC-06", MC("'timeout':'-1s'"), "$.methodConfig[0].timeout",
        "negative"),
    BAD("SC-06", MC("'timeout':'315576000001s'"), "$.methodConfig[0].timeout",
        "at most 315576000000"),
    BAD("SC-06", MC("'timeout':'1.0000000001s'"), "$.methodConfig[0].timeout",
        "at most 9 digits"),
    BAD("SC-06", MC("'timeout':'1.s'"), "$.methodConfig[0].timeout",
        "a digit must follow"),
    BAD("SC-06", MC("'timeout':1"), "$.methodConfig[0].timeout",
        "must be a duration string"),
    BAD("SC-06", MC("'timeout':'+1s'"), "$.methodConfig[0].timeout",
        "must start with a digit"),
    BAD("SC-06", MC("'timeout':'1ms'"), "$.methodConfig[0].timeout",
        "duration string"),
    BAD("SC-06", MC("'timeout':' 1s'"), "$.methodConfig[0].timeout",
        "must start with a digit"),
    BAD("SC-06", MC("'timeout':'s'"), "$.methodConfig[0].timeout",
        "must start with a digit"),

    /* SC-07: waitForReady, message limits */
    OKP("SC-07", MC("'waitForReady':true"), P_WFR, GRIT_WFR_TRUE),
    OKP("SC-07", MC("'waitForReady':false"), P_WFR, GRIT_WFR_FALSE),
    BAD("SC-07", MC("'waitForReady':'yes'"), "$.methodConfig[0].waitForReady",
        "true or false"),
    OKP("SC-07", MC("'maxRequestMessageBytes':0"), P_REQ_BYTES, 0),
    OKP("SC-07", MC("'maxRequestMessageBytes':4194304"), P_REQ_BYTES, 4194304),
    BAD("SC-07", MC("'maxRequestMessageBytes':-1"),
        "$.methodConfig[0].maxRequestMessageBytes", "non-negative integer"),
    BAD("SC-07", MC("'maxResponseMessageBytes':1.5"),
        "$.methodConfig[0].maxResponseMessageBytes", "non-negative integer"),
    BAD("SC-07", MC("'maxResponseMessageBytes':'1024'"),
        "$.methodConfig[0].maxResponseMessageBytes", "non-negative integer"),

    /* SC-08: load balancing */
    OKP("SC-08", "{}", P_LB, GRIT_LB_PICK_FIRST),
    OKP("SC-08", LBC("[{'round_robin':{}}]"), P_LB, GRIT_LB_ROUND_ROBIN),
    OKP("SC-08", LBC("[{'grpclb':{}},{'round_robin':{}}]"), P_LB,
        GRIT_LB_ROUND_ROBIN),
    OKP("SC-08", LBC("[{'pick_first':{}},{'round_robin':{}}]"), P_LB,
        GRIT_LB_PICK_FIRST),
    OKP("SC-08", LBC("[{'round_robin':{}},5]"), P_LB, GRIT_LB_ROUND_ROBIN),
    BAD("SC-08", LBC("[{'xds':{}}]"), "$.loadBalancingConfig",
        "no known LB policy"),
    BAD("SC-08", LBC("[]"), "$.loadBalancingConfig", "no known LB policy"),
    BAD("SC-08", LBC("[{'ROUND_ROBIN':{}}]"), "$.loadBalancingConfig",
        "no known LB policy"),
    BAD("SC-08", LBC("[{'a':{},'round_robin':{}}]"), "$.loadBalancingConfig[0]",
        "exactly one key"),
    BAD("SC-08", LBC("[{}]"), "$.loadBalancingConfig[0]", "exactly one key"),
    BAD("SC-08", LBC("[{'round_robin':5}]"),
        "$.loadBalancingConfig[0].round_robin", "must be an object"),
    BAD("SC-08", LBC("[{'grpclb':5},{'round_robin':{}}]"),
        "$.loadBalancingConfig[0]", "must be an object"),
    BAD("SC-08", LBC("{'round_robin':{}}"), "$.loadBalancingConfig",
        "must be an array"),
    /* OD-01: outlier_detection_experimental (gRFC A50) */
    OKP("OD-01",
        LBC("[{'outlier_detection_experimental':{'childPolicy':"
            "[{'round_robin':{}}]}}]"),
        P_LB, GRIT_LB_ROUND_ROBIN),
    OKP("OD-01",
        LBC("[{'outlier_detection_experimental':{'childPolicy':"
            "[{'xds':{}},{'pick_first':{}}]}}]"),
        P_LB, GRIT_LB_PICK_FIRST),
    BAD("OD-01", LBC("[{'outlier_detection_experimental':{}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental.childPolicy",
        "is required"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'childPolicy':"
            "[{'outlier_detection_experimental':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental.childPolicy",
        "no known child policy"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'interval':'1',"
            "'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental.interval",
        "'s'"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'interval':'0s',"
            "'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental.interval",
        "at least 0.001s"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'maxEjectionPercent':101,"
            "'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental."
        "maxEjectionPercent",
        "0..100"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'failurePercentageEjection':"
            "{'threshold':-1},'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental."
        "failurePercentageEjection.threshold",
        "0..100"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'successRateEjection':"
            "{'requestVolume':1.5},'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental."
        "successRateEjection.requestVolume",
        "integer"),
    BAD("OD-01",
        LBC("[{'outlier_detection_experimental':{'successRateEjection':5,"
            "'childPolicy':[{'round_robin':{}}]}}]"),
        "$.loadBalancingConfig[0].outlier_detection_experimental."
        "successRateEjection",
        "must be an object"),
    /* HC-01: healthCheckConfig (gRFC A17) */
    OK("HC-01", "{'healthCheckConfig':{'serviceName':'svc'}}"),
    OK("HC-01", "{'healthCheckConfig':{}}"),
    BAD("HC-01", "{'healthCheckConfig':{'serviceName':5}}",
        "$.healthCheckConfig.serviceName", "must be a string"),
    BAD("HC-01", "{'healthCheckConfig':'svc'}", "$.healthCheckConfig",
        "must be an object"),
    OKP("SC-08", "{'loadBalancingPolicy':'ROUND_ROBIN'}", P_LB,
        GRIT_LB_ROUND_ROBIN),
    OKP("SC-08", "{'loadBalancingPolicy':'Pick_First'}", P_LB,
        GRIT_LB_PICK_FIRST),
    BAD("SC-08", "{'loadBalancingPolicy':'grpclb'}", "$.loadBalancingPolicy",
        "unknown LB policy \"grpclb\""),
    BAD("SC-08", "{'loadBalancingPolicy':5}", "$.loadBalancingPolicy",
        "must be a string"),
    OKP("SC-08",
        "{'loadBalancingPolicy':'round_robin',"
        "'loadBalancingConfig':[{'pick_first':{}}]}",
        P_LB, GRIT_LB_PICK_FIRST),
    OKP("SC-08",
        "{'loadBalancingConfig':[{'round_robin':{}}],"
        "'loadBalancingPolicy':'pick_first'}",
        P_LB, GRIT_LB_ROUND_ROBIN),
    BAD("SC-08",
        "{'loadBalancingConfig':[{'round_robin':{}}],"
        "'loadBalancingPolicy':'nope'}",
        "$.loadBalancingPolicy", "unknown LB policy"),
    OKP("SC-08", LBC("[{'pick_first':{'shuffleAddressList':true}}]"), P_SHUFFLE,
        1),
    OKP("SC-08", LBC("[{'pick_first':{'shuffleAddressList':false}}]"),
        P_SHUFFLE, 0),
    OKP("SC-08", LBC("[{'pick_first':{}}]"), P_SHUFFLE, 0),
    OKP("SC-08", LBC("[{'round_robin':{'shuffleAddressList':true}}]"),
        P_SHUFFLE, 0),
    BAD("SC-08", LBC("[{'pick_first':{'shuffleAddressList':'yes'}}]"),
        "$.loadBalancingConfig[0].pick_first.shuffleAddressList",
        "true or false"),

    /* SC-09 */
    BAD("SC-09",
        MC("'retryPolicy':{" RP_BASE "," RP_CODES "},"
           "'hedgingPolicy':{'maxAttempts':2}"),
        "$.methodConfig[0].hedgingPolicy", "together with retryPolicy"),

    /* SC-10: retryPolicy */
    OKP("SC-10", RP(RP_BASE "," RP_CODES), P_RETRY_ATTEMPTS, 3),
    BAD("SC-10",
        RP("'maxAttempts':1,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxAttempts", "integer > 1"),
    OKP("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        P_RETRY_ATTEMPTS, 2),
    OKP("SC-10",
        RP("'maxAttempts':6,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        P_RETRY_ATTEMPTS, 5),
    OKC("SC-10", 10,
        RP("'maxAttempts':6,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        P_RETRY_ATTEMPTS, 6),
    OKC("SC-10", 3,
        RP("'maxAttempts':6,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        P_RETRY_ATTEMPTS, 3),
    BAD("SC-10",
        RP("'maxAttempts':2.5,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxAttempts", "integer"),
    BAD("SC-10",
        RP("'maxAttempts':2.0,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxAttempts", "integer"),
    BAD("SC-10",
        RP("'maxAttempts':'3','initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxAttempts", "integer"),
    BAD("SC-10",
        RP("'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxAttempts", "is required"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'0s','maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.initialBackoff", "> 0"),
    BAD("SC-10",
        RP("'maxAttempts':2,'maxBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.initialBackoff", "is required"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'0s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxBackoff", "> 0"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s',"
           "'backoffMultiplier':1," RP_CODES),
        "$.methodConfig[0].retryPolicy.maxBackoff", "is required"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':0," RP_CODES),
        "$.methodConfig[0].retryPolicy.backoffMultiplier", "number > 0"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':-1.5," RP_CODES),
        "$.methodConfig[0].retryPolicy.backoffMultiplier", "number > 0"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':'2'," RP_CODES),
        "$.methodConfig[0].retryPolicy.backoffMultiplier", "number > 0"),
    BAD("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s'," RP_CODES),
        "$.methodConfig[0].retryPolicy.backoffMultiplier", "is required"),
    OKP("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':1.5," RP_CODES),
        P_RETRY_MULT_X1000, 1500),
    OKP("SC-10",
        RP("'maxAttempts':2,'initialBackoff':'1s','maxBackoff':'1s',"
           "'backoffMultiplier':2," RP_CODES),
        P_RETRY_MULT_X1000, 2000),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes", "non-empty"),
    BAD("SC-10", RP(RP_BASE),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes", "non-empty"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':null"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes", "non-empty"),
    OKP("SC-10",
        RP(RP_BASE ",'retryableStatusCodes':[],'perAttemptRecvTimeout':'1s'"),
        P_RECV_TIMEOUT, 1000000000),
    OKP("SC-10", RP(RP_BASE ",'perAttemptRecvTimeout':'0.25s'"), P_RETRY_CODES,
        0),
    BAD("SC-10",
        RP(RP_BASE ",'retryableStatusCodes':[],'perAttemptRecvTimeout':'0s'"),
        "$.methodConfig[0].retryPolicy.perAttemptRecvTimeout", "> 0"),
    BAD("SC-10", RP(RP_BASE "," RP_CODES ",'perAttemptRecvTimeout':'1'"),
        "$.methodConfig[0].retryPolicy.perAttemptRecvTimeout", "'s'"),
    OKP("SC-10", RP(RP_BASE ",'retryableStatusCodes':[14]"), P_RETRY_CODES,
        B(UNAVAILABLE)),
    OKP("SC-10", RP(RP_BASE ",'retryableStatusCodes':['unavailable']"),
        P_RETRY_CODES, B(UNAVAILABLE)),
    OKP("SC-10",
        RP(RP_BASE ",'retryableStatusCodes':['Deadline_Exceeded',14,1,16,"
                   "'UNAVAILABLE']"),
        P_RETRY_CODES,
        B(DEADLINE_EXCEEDED) | B(UNAVAILABLE) | B(CANCELLED) |
            B(UNAUTHENTICATED)),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':['OK']"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]",
        "OK is not allowed"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[14,0]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[1]",
        "OK is not allowed"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[17]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]", "0..16"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[-1]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]", "0..16"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':['BOGUS']"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]",
        "unknown status code name \"BOGUS\""),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':['14']"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]",
        "unknown status code name"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[14.0]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[0]",
        "integer or a name"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':[14,null]"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes[1]",
        "integer or a name"),
    BAD("SC-10", RP(RP_BASE ",'retryableStatusCodes':'UNAVAILABLE'"),
        "$.methodConfig[0].retryPolicy.retryableStatusCodes",
        "must be an array"),
    BAD("SC-10", MC("'retryPolicy':5"), "$.methodConfig[0].retryPolicy",
        "must be an object"),

    /* SC-11: hedgingPolicy */
    OKP("SC-11", HP("'maxAttempts':3"), P_HEDGE_DELAY, 0),
    OKP("SC-11", HP("'maxAttempts':3"), P_HEDGE_CODES, 0),
    OKP("SC-11", HP("'maxAttempts':3,'hedgingDelay':'0.5s'"), P_HEDGE_DELAY,
        500000000),
    OKP("SC-11", HP("'maxAttempts':9"), P_HEDGE_ATTEMPTS, 5),
    OKC("SC-11", 7, HP("'maxAttempts':9"), P_HEDGE_ATTEMPTS, 7),
    BAD("SC-11", HP("'maxAttempts':1"),
        "$.methodConfig[0].hedgingPolicy.maxAttempts", "integer > 1"),
    BAD("SC-11", HP("'hedgingDelay':'1s'"),
        "$.methodConfig[0].hedgingPolicy.maxAttempts", "is required"),
    OKP("SC-11", HP("'maxAttempts':2,'nonFatalStatusCodes':[]"), P_HEDGE_CODES,
        0),
    OKP("SC-11", HP("'maxAttempts':2,'nonFatalStatusCodes':['unavailable',13]"),
        P_HEDGE_CODES, B(UNAVAILABLE) | B(INTERNAL)),
    BAD("SC-11", HP("'maxAttempts':2,'nonFatalStatusCodes':['OK']"),
        "$.methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]",
        "OK is not allowed"),
    BAD("SC-11", HP("'maxAttempts':2,'hedgingDelay':'-1s'"),
        "$.methodConfig[0].hedgingPolicy.hedgingDelay", "negative"),
    BAD("SC-11", HP("'maxAttempts':2,'hedgingDelay':1"),
        "$.methodConfig[0].hedgingPolicy.hedgingDelay", "duration string"),
    BAD("SC-11", HP("'maxAttempts':2,'nonFatalStatusCodes':{}"),
        "$.methodConfig[0].hedgingPolicy.nonFatalStatusCodes",
        "must be an array"),
    BAD("SC-11", MC("'hedgingPolicy':[]"), "$.methodConfig[0].hedgingPolicy",
        "must be an object"),

    /* SC-12: retryThrottling */
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':0.1"), P_MAX_TOKENS, 10000),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':0.1"), P_RATIO, 100),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':0.5466"), P_RATIO, 546),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':0.29"), P_RATIO, 290),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':0.001"), P_RATIO, 1),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':1"), P_RATIO, 1000),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':999.999"), P_RATIO, 999999),
    OKP("SC-12", TT("'maxTokens':10,'tokenRatio':1e9"), P_RATIO, 1000000),
    OKP("SC-12", TT("'maxTokens':1000,'tokenRatio':1"), P_MAX_TOKENS, 1000000),
    OKP("SC-12", TT("'maxTokens':1,'tokenRatio':1"), P_MAX_TOKENS, 1000),
    BAD("SC-12", TT("'maxTokens':10,'tokenRatio':0.0001"),
        "$.retryThrottling.tokenRatio", "at least 0.001"),
    BAD("SC-12", TT("'maxTokens':10,'tokenRatio':0.0009"),
        "$.retryThrottling.tokenRatio", "at least 0.001"),
    BAD("SC-12", TT("'maxTokens':10,'tokenRatio':0"),
        "$.retryThrottling.tokenRatio", "number > 0"),
    BAD("SC-12", TT("'maxTokens':10,'tokenRatio':-1"),
        "$.retryThrottling.tokenRatio", "number > 0"),
    BAD("SC-12", TT("'maxTokens':10,'tokenRatio':'0.5'"),
        "$.retryThrottling.tokenRatio", "number > 0"),
    BAD("SC-12", TT("'maxTokens':0,'tokenRatio':1"),
        "$.retryThrottling.maxTokens", "(0, 1000]"),
    BAD("SC-12", TT("'maxTokens':1001,'tokenRatio':1"),
        "$.retryThrottling.maxTokens", "(0, 1000]"),
    BAD("SC-12", TT("'maxTokens':-5,'tokenRatio':1"),
        "$.retryThrottling.maxTokens", "(0, 1000]"),
    BAD("SC-12", TT("'maxTokens':10.5,'tokenRatio':1"),
        "$.retryThrottling.maxTokens", "(0, 1000]"),
    BAD("SC-12", TT("'tokenRatio':1"), "$.retryThrottling.maxTokens",
        "is required"),
    BAD("SC-12", TT("'maxTokens':10"), "$.retryThrottling.tokenRatio",
        "is required"),
    BAD("SC-12", "{'retryThrottling':[]}", "$.retryThrottling",
        "must be an object"),
};

static void check_probe(const row *r, const grit_svccfg *cfg) {
  const grit_method_cfg *mc = grit_svccfg_find(cfg, "/S/M");
  const grit_svccfg_global *g = grit_svccfg_get_global(cfg);
  switch (r->probe) {
  case P_NONE:
    return;
  case P_NO_METHOD:
    ASSERT_NULL(mc);
    return;
  case P_LB:
    ASSERT_EQ(g->lb, r->value);
    return;
  case P_SHUFFLE:
    ASSERT_EQ(g->shuffle_address_list, r->value);
    return;
  case P_MAX_TOKENS:
    ASSERT(g->has_throttling);
    ASSERT_EQ(g->max_tokens_milli, r->value);
    return;
  case P_RATIO:
    ASSERT(g->has_throttling);
    ASSERT_EQ(g->token_ratio_milli, r->value);
    return;
  case P_NO_THROTTLE:
    ASSERT(!g->has_throttling);
    return;
  default:
    break;
  }
  ASSERT_NOT_NULL(mc);
  switch (r->probe) {
  case P_TIMEOUT:
    ASSERT(mc->has_timeout);
    ASSERT_EQ(mc->timeout_ns, r->value);
    break;
  case P_WFR:
    ASSERT_EQ(mc->wait_for_ready, r->value);
    break;
  case P_REQ_BYTES:
    ASSERT(mc->has_max_request_bytes);
    ASSERT_EQ(mc->max_request_bytes, r->value);
    break;
  case P_RETRY_ATTEMPTS:
    ASSERT_EQ(mc->policy, GRIT_POLICY_RETRY);
    ASSERT_EQ(mc->retry.max_attempts, r->value);
    break;
  case P_RETRY_CODES:
    ASSERT_EQ(mc->policy, GRIT_POLICY_RETRY);
    ASSERT_EQ(mc->retry.retryable_codes, r->value);
    break;
  case P_RETRY_MULT_X1000:
    ASSERT_EQ(mc->policy, GRIT_POLICY_RETRY);
    ASSERT_EQ((int64_t)(mc->retry.backoff_multiplier * 1000), r->value);
    break;
  case P_RECV_TIMEOUT:
    ASSERT_EQ(mc->policy, GRIT_POLICY_RETRY);
    ASSERT_EQ(mc->retry.has_per_attempt_recv_timeout, r->value != 0);
    ASSERT_EQ(mc->retry.per_attempt_recv_timeout_ns, r->value);
    break;
  case P_HEDGE_ATTEMPTS:
    ASSERT_EQ(mc->policy, GRIT_POLICY_HEDGING);
    ASSERT_EQ(mc->hedging.max_attempts, r->value);
    break;
  case P_HEDGE_DELAY:
    ASSERT_EQ(mc->policy, GRIT_POLICY_HEDGING);
    ASSERT_EQ(mc->hedging.hedging_delay_ns, r->value);
    break;
  case P_HEDGE_CODES:
    ASSERT_EQ(mc->policy, GRIT_POLICY_HEDGING);
    ASSERT_EQ(mc->hedging.non_fatal_codes, r->value);
    break;
  default:
    ASSERT(!"unhandled probe");
  }
}

static void check_row(size_t i, const row *r) {
  grit_error_detail d;
  memset(&d, 0x5a, sizeof(d));
  grit_svccfg *cfg = parse_q(r->json, r->cap, &d);
  if (r->ok) {
    if (!cfg)
      TEST_FAIL_AT(__FILE__, __LINE__, "row %zu (%s) %s: rejected at %s: %s", i,
                   r->rule, r->json, d.path, d.reason);
    int before = test_failures;
    check_probe(r, cfg);
    if (test_failures != before)
      fprintf(stderr, "  in row %zu (%s) %s\n", i, r->rule, r->json);
    grit_svccfg_unref(cfg);
    return;
  }
  if (cfg) {
    grit_svccfg_unref(cfg);
    TEST_FAIL_AT(__FILE__, __LINE__, "row %zu (%s) %s: accepted", i, r->rule,
                 r->json);
  }
  if (d.code != GRIT_ERR_INVALID_CONFIG || strcmp(d.path, r->path) != 0 ||
      !strstr(d.reason, r->reason))
    TEST_FAIL_AT(__FILE__, __LINE__,
                 "row %zu (%s) %s:\n  got  %d %s: %s\n  want %d %s: ...%s...",
                 i, r->rule, r->json, d.code, d.path, d.reason,
                 GRIT_ERR_INVALID_CONFIG, r->path, r->reason);
}

static void test_table(void) {
  size_t n = sizeof(rows) / sizeof(rows[0]);
  for (size_t i = 0; i < n; i++)
    check_row(i, &rows[i]);
  fprintf(stderr, "  %zu table rows\n", n);
}

/* Every rule of SC-01..SC-12 that can be violated appears in the table. */
static void test_table_covers_rules(void) {
  static const char *const rules[] = {"SC-01", "SC-02", "SC-04", "SC-06",
                                      "SC-07", "SC-08", "SC-09", "SC-10",
                                      "SC-11", "SC-12", "OD-01", "HC-01"};
  for (size_t k = 0; k < sizeof(rules) / sizeof(rules[0]); k++) {
    size_t bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
      if (strcmp(rows[i].rule, rules[k]) == 0 && !rows[i].ok)
        bad++;
    }
    if (bad == 0)
      TEST_FAIL_AT(__FILE__, __LINE__, "no invalid row for %s", rules[k]);
  }
}

/* ---- SC-02: collect every problem ---- */

typedef struct collected {
  int n;
  char paths[8][256];
} collected;

static void collect(const grit_error_detail *p, void *ud) {
  collected *c = ud;
  ASSERT_EQ(p->code, GRIT_ERR_INVALID_CONFIG);
  if (c->n < 8)
    snprintf(c->paths[c->n], sizeof(c->paths[0]), "%s", p->path);
  c->n++;
}

static void test_collect_all_problems(void) {
  const char *j = q("{'methodConfig':[{'name':[{'method':'M'}],"
                    "'timeout':'1','retryPolicy':{'maxAttempts':1,"
                    "'initialBackoff':'1s','maxBackoff':'1s',"
                    "'backoffMultiplier':0,'retryableStatusCodes':[14]}},"
                    "{'name':[{'service':'S'}]},{'name':[{'service':'S'}]}],"
                    "'retryThrottling':{'maxTokens':0,'tokenRatio':1},"
                    "'loadBalancingPolicy':'x'}");
  collected c = {0};
  grit_svccfg_opts o = {.on_problem = collect, .user_data = &c};
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), &o, &d);
  ASSERT_NULL(cfg);
  ASSERT_EQ(c.n, 7);
  ASSERT_STR_EQ(c.paths[0], "$.methodConfig[0].name[0]");
  ASSERT_STR_EQ(c.paths[1], "$.methodConfig[0].timeout");
  ASSERT_STR_EQ(c.paths[2], "$.methodConfig[0].retryPolicy.maxAttempts");
  ASSERT_STR_EQ(c.paths[3], "$.methodConfig[0].retryPolicy.backoffMultiplier");
  ASSERT_STR_EQ(c.paths[4], "$.methodConfig[2].name[0]");
  ASSERT_STR_EQ(c.paths[5], "$.retryThrottling.maxTokens");
  ASSERT_STR_EQ(c.paths[6], "$.loadBalancingPolicy");
  ASSERT_EQ(d.code, GRIT_ERR_INVALID_CONFIG);
  ASSERT_STR_EQ(d.path, "$.methodConfig[0].name[0]");
}

static void test_null_detail_ok(void) {
  const char *j = q("{'methodConfig':5}");
  ASSERT_NULL(grit_svccfg_parse(j, strlen(j), NULL, NULL));
  ASSERT_NULL(grit_svccfg_parse(NULL, 0, NULL, NULL));
  grit_svccfg *cfg = grit_svccfg_parse("{}", 2, NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  grit_svccfg_unref(cfg);
  grit_svccfg_unref(NULL);
}

/* Input need not be NUL-terminated: only |len| bytes are read. */
static void test_length_bounded(void) {
  const char buf[] = {'{', '}', 'x'};
  grit_svccfg *cfg = grit_svccfg_parse(buf, 2, NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  grit_svccfg_unref(cfg);
  grit_error_detail d;
  ASSERT_NULL(grit_svccfg_parse(buf, 3, NULL, &d));
  ASSERT_STR_EQ(d.path, "$");
}

/* ---- SC-05: lookup ---- */

static void test_lookup_order(void) {
  grit_error_detail d;
  grit_svccfg *cfg =
      parse_q("{'methodConfig':["
              "{'name':[{'service':'pkg.Svc','method':'Get'}],'timeout':'1s'},"
              "{'name':[{'service':'pkg.Svc'}],'timeout':'2s'},"
              "{'name':[{}],'timeout':'3s'},"
              "{'name':[{'service':'a/b','method':'c'}],'timeout':'4s'}]}",
              0, &d);
  ASSERT_NOT_NULL(cfg);
  const grit_method_cfg *m;
  m = grit_svccfg_find(cfg, "/pkg.Svc/Get");
  ASSERT_NOT_NULL(m);
  ASSERT_EQ(m->timeout_ns, 1000000000);
  m = grit_svccfg_find(cfg, "/pkg.Svc/Put");
  ASSERT_NOT_NULL(m);
  ASSERT_EQ(m->timeout_ns, 2000000000);
  m = grit_svccfg_find(cfg, "/pkg.Svc/get"); /* case-sensitive */
  ASSERT_EQ(m->timeout_ns, 2000000000);
  m = grit_svccfg_find(cfg, "/pkg.svc/Get");
  ASSERT_EQ(m->timeout_ns, 3000000000);
  m = grit_svccfg_find(cfg, "/other.Svc/Get");
  ASSERT_EQ(m->timeout_ns, 3000000000);
  m = grit_svccfg_find(cfg, "/pkg.Sv/Get"); /* no prefix matching */
  ASSERT_EQ(m->timeout_ns, 3000000000);
  m = grit_svccfg_find(cfg, "/pkg.Svc.X/Get");
  ASSERT_EQ(m->timeout_ns, 3000000000);
  m = grit_svccfg_find(cfg, "/a/b/c");
  ASSERT_EQ(m->timeout_ns, 4000000000);
  m = grit_svccfg_find(cfg, "");
  ASSERT_EQ(m->timeout_ns, 3000000000);
  ASSERT_NULL(grit_svccfg_find(cfg, NULL));
  ASSERT_NULL(grit_svccfg_find(NULL, "/pkg.Svc/Get"));
  grit_svccfg_unref(cfg);
}

static void test_lookup_none(void) {
  grit_svccfg *cfg =
      parse_q("{'methodConfig':[{'name':[{'service':'S','method':'M'}],"
              "'waitForReady':true}]}",
              0, NULL);
  ASSERT_NOT_NULL(cfg);
  ASSERT_NOT_NULL(grit_svccfg_find(cfg, "/S/M"));
  ASSERT_NULL(grit_svccfg_find(cfg, "/S/N"));
  ASSERT_NULL(grit_svccfg_find(cfg, "/S/M/"));
  ASSERT_NULL(grit_svccfg_find(cfg, "/S/MM"));
  ASSERT_NULL(grit_svccfg_find(cfg, "/T/M"));
  ASSERT_NULL(grit_svccfg_find(cfg, "S/M"));
  grit_svccfg_unref(cfg);
  cfg = parse_q("{}", 0, NULL);
  ASSERT_NULL(grit_svccfg_find(cfg, "/S/M"));
  grit_svccfg_unref(cfg);
}

static void test_lookup_many_names(void) {
  char json[8192];
  size_t n = 0;
  n += (size_t)snprintf(json + n, sizeof(json) - n, "{\"methodConfig\":[");
  for (int i = 0; i < 100; i++)
    n += (size_t)snprintf(json + n, sizeof(json) - n,
                          "%s{\"name\":[{\"service\":\"s%d\",\"method\":"
                          "\"m\"}],\"timeout\":\"%ds\"}",
                          i ? "," : "", i, i + 1);
  snprintf(json + n, sizeof(json) - n, "]}");
  grit_svccfg *cfg = grit_svccfg_parse(json, strlen(json), NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  for (int i = 0; i < 100; i++) {
    char path[32];
    snprintf(path, sizeof(path), "/s%d/m", i);
    const grit_method_cfg *m = grit_svccfg_find(cfg, path);
    ASSERT_NOT_NULL(m);
    ASSERT_EQ(m->timeout_ns, (int64_t)(i + 1) * 1000000000);
  }
  ASSERT_NULL(grit_svccfg_find(cfg, "/s100/m"));
  grit_svccfg_unref(cfg);
}

static void test_ref_unref(void) {
  grit_svccfg *cfg = parse_q(MC("'timeout':'1s'"), 0, NULL);
  ASSERT_NOT_NULL(cfg);
  ASSERT(grit_svccfg_ref(cfg) == cfg);
  const grit_method_cfg *m = grit_svccfg_find(cfg, "/S/M");
  grit_svccfg_unref(cfg);
  ASSERT_EQ(m->timeout_ns, 1000000000); /* still alive: one ref left */
  grit_svccfg_unref(cfg);
  ASSERT_NULL(grit_svccfg_ref(NULL));
}

static void test_full_retry_policy_values(void) {
  grit_svccfg *cfg = parse_q(
      RP("'maxAttempts':4,'initialBackoff':'0.1s','maxBackoff':'1.5s',"
         "'backoffMultiplier':1.6,'retryableStatusCodes':['UNAVAILABLE',"
         "'aborted'],'perAttemptRecvTimeout':'2s'"),
      0, NULL);
  ASSERT_NOT_NULL(cfg);
  const grit_method_cfg *m = grit_svccfg_find(cfg, "/S/Anything");
  ASSERT_NOT_NULL(m);
  ASSERT_EQ(m->policy, GRIT_POLICY_RETRY);
  ASSERT_EQ(m->retry.max_attempts, 4);
  ASSERT_EQ(m->retry.initial_backoff_ns, 100000000);
  ASSERT_EQ(m->retry.max_backoff_ns, 1500000000);
  ASSERT(m->retry.backoff_multiplier == 1.6);
  ASSERT_EQ(m->retry.retryable_codes, B(UNAVAILABLE) | B(ABORTED));
  ASSERT(m->retry.has_per_attempt_recv_timeout);
  ASSERT_EQ(m->retry.per_attempt_recv_timeout_ns, 2000000000);
  ASSERT(!m->has_timeout);
  ASSERT(!m->has_max_request_bytes);
  ASSERT(!m->has_max_response_bytes);
  ASSERT_EQ(m->wait_for_ready, GRIT_WFR_UNSET);
  grit_svccfg_unref(cfg);
}

/* The default cap applies when opts is NULL too. */
static void test_cap_with_null_opts(void) {
  const char *j = q(RP("'maxAttempts':100,'initialBackoff':'1s',"
                       "'maxBackoff':'1s','backoffMultiplier':1," RP_CODES));
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  ASSERT_EQ(grit_svccfg_find(cfg, "/S/M")->retry.max_attempts, 5);
  grit_svccfg_unref(cfg);
}

static void test_global_of_null(void) {
  const grit_svccfg_global *g = grit_svccfg_get_global(NULL);
  ASSERT_NOT_NULL(g);
  ASSERT(!g->has_throttling);
  ASSERT_EQ(g->lb, GRIT_LB_PICK_FIRST);
}

/* ---- SC-06 duration parser on its own ---- */

static void test_duration_parser(void) {
  static const struct {
    const char *s;
    bool ok;
    int64_t ns;
  } cases[] = {
      {"1s", true, 1000000000},
      {"0.5s", true, 500000000},
      {"1.000000001s", true, 1000000001},
      {"0s", true, 0},
      {"00.10s", true, 100000000},
      {"10.123456789s", true, 10123456789},
      {"315576000000s", true, INT64_MAX},
      {"315576000000.999999999s", true, INT64_MAX},
      {".5s", false, 0},
      {"1", false, 0},
      {"-1s", false, 0},
      {"-0s", false, 0},
      {"315576000001s", false, 0},
      {"99999999999999999999999s", false, 0},
      {"1.0000000001s", false, 0},
      {"1.s", false, 0},
      {"s", false, 0},
      {"", false, 0},
      {"1S", false, 0},
      {"1e3s", false, 0},
      {"1.5.5s", false, 0},
      {"1s ", false, 0},
      {"0x10s", false, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int64_t ns = -7;
    grit_error_detail d;
    grit_err rv =
        grit_svccfg_parse_duration(cases[i].s, strlen(cases[i].s), &ns, &d);
    if (cases[i].ok) {
      if (rv != GRIT_OK || ns != cases[i].ns)
        TEST_FAIL_AT(__FILE__, __LINE__, "\"%s\": rv %d ns %lld (%s)",
                     cases[i].s, rv, (long long)ns, d.reason);
    } else {
      if (rv != GRIT_ERR_PARSE || ns != -7 || d.code != GRIT_ERR_PARSE ||
          d.reason[0] == '\0')
        TEST_FAIL_AT(__FILE__, __LINE__, "\"%s\": rv %d accepted", cases[i].s,
                     rv);
    }
  }
  ASSERT_EQ(grit_svccfg_parse_duration(NULL, 0, NULL, NULL), GRIT_ERR_PARSE);
  /* Length-bounded: "1s" out of "1sX". */
  int64_t ns = 0;
  ASSERT_OK(grit_svccfg_parse_duration("1sX", 2, &ns, NULL));
  ASSERT_EQ(ns, 1000000000);
}

/* ---- SC-10 status code element parser on its own ---- */

static void test_status_code_parser(void) {
  static const struct {
    const char *json;
    int code; /* -1: invalid */
  } cases[] = {
      {"14", 14},
      {"1", 1},
      {"16", 16},
      {"\"UNAVAILABLE\"", 14},
      {"\"unavailable\"", 14},
      {"\"Cancelled\"", 1},
      {"\"data_loss\"", 15},
      {"\"UNAUTHENTICATED\"", 16},
      {"0", -1},
      {"\"OK\"", -1},
      {"\"ok\"", -1},
      {"17", -1},
      {"-1", -1},
      {"14.0", -1},
      {"\"14\"", -1},
      {"\"UNAVAILABLEX\"", -1},
      {"\"\"", -1},
      {"null", -1},
      {"true", -1},
      {"[14]", -1},
      {"{}", -1},
      {"", -1},
      {"\"CANCELED\"", -1},
      {"99999999999999999999", -1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    grit_status_code code = (grit_status_code)99;
    grit_error_detail d;
    grit_err rv = grit_svccfg_parse_status_code(
        cases[i].json, strlen(cases[i].json), &code, &d);
    if (cases[i].code >= 0) {
      if (rv != GRIT_OK || (int)code != cases[i].code)
        TEST_FAIL_AT(__FILE__, __LINE__, "%s: rv %d code %d (%s)",
                     cases[i].json, rv, (int)code, d.reason);
    } else if (rv != GRIT_ERR_PARSE || (int)code != 99 ||
               d.code != GRIT_ERR_PARSE) {
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: accepted as %d", cases[i].json,
                   (int)code);
    }
  }
}

/* ---- DNS-02: TXT record extraction ---- */

#define CHUNK(s, start)                                                        \
  { (const uint8_t *)(s), sizeof(s) - 1, start }

static void test_txt_extract(void) {
  char *v;
  size_t len;
  /* Prefix, then concatenation of that record's strings only. */
  const grit_txt_chunk a[] = {
      CHUNK("v=spf1 -all", true),
      CHUNK("grpc_config=[{\"serviceConfig\":", true),
      CHUNK("{}}", false),
      CHUNK("]", false),
      CHUNK("grpc_config=other", true),
      CHUNK("tail", false),
  };
  ASSERT_OK(grit_svccfg_txt_extract(a, 6, &v, &len));
  ASSERT_STR_EQ(v, "[{\"serviceConfig\":{}}]");
  ASSERT_EQ(len, strlen(v));
  grit_free(v);

  /* No record with the prefix; a prefix in a non-first string is ignored. */
  const grit_txt_chunk b[] = {
      CHUNK("hello", true),
      CHUNK("grpc_config=[]", false),
      CHUNK("GRPC_CONFIG=[]", true),
      CHUNK("grpc_config", true),
  };
  v = (char *)1;
  ASSERT_EQ(grit_svccfg_txt_extract(b, 4, &v, &len), GRIT_ERR_NOT_FOUND);
  ASSERT_NULL(v);
  ASSERT_EQ(grit_svccfg_txt_extract(b, 0, &v, NULL), GRIT_ERR_NOT_FOUND);

  /* The first chunk starts a record even without the flag; empty value. */
  const grit_txt_chunk c[] = {CHUNK("grpc_config=", false), CHUNK("", false)};
  ASSERT_OK(grit_svccfg_txt_extract(c, 2, &v, &len));
  ASSERT_EQ(len, 0);
  ASSERT_STR_EQ(v, "");
  grit_free(v);

  /* First matching record wins. */
  const grit_txt_chunk d[] = {CHUNK("grpc_config=1", true),
                              CHUNK("grpc_config=2", true)};
  ASSERT_OK(grit_svccfg_txt_extract(d, 2, &v, NULL));
  ASSERT_STR_EQ(v, "1");
  grit_free(v);
}

/* ---- DNS-03/04: choosing ---- */

static grit_err choose(const char *txt_q, const char *host, uint64_t seed,
                       char **out, grit_error_detail *d) {
  grit_rng rng;
  grit_rng_seed(&rng, seed);
  const char *t = q(txt_q);
  size_t len = 0;
  grit_err rv = grit_svccfg_choose_txt(t, strlen(t), host, &rng, out, &len, d);
  if (rv == GRIT_OK && strlen(*out) != len)
    return GRIT_ERR_INVALID_ARG;
  return rv;
}

static void expect_choice(int line, const char *txt, const char *host,
                          const char *want) {
  char *out = NULL;
  grit_error_detail d;
  grit_err rv = choose(txt, host, 1, &out, &d);
  if (want) {
    char w[512];
    qinto(w, sizeof(w), (want));
    if (rv != GRIT_OK || strcmp(out, w) != 0)
      TEST_FAIL_AT(__FILE__, line, "%s: rv %d chose %s, want %s (%s)", txt, rv,
                   out ? out : "-", w, d.reason);
  } else if (rv != GRIT_ERR_NOT_FOUND || out != NULL) {
    TEST_FAIL_AT(__FILE__, line, "%s: rv %d chose %s, want none", txt, rv,
                 out ? out : "-");
  }
  grit_free(out);
}

static void test_txt_choose(void) {
  expect_choice(__LINE__, "[{'serviceConfig':{'a':1}}]", NULL, "{'a':1}");
  expect_choice(__LINE__, "[]", NULL, NULL);
  /* clientLanguage, case-insensitive against c */
  expect_choice(__LINE__,
                "[{'clientLanguage':['go','java'],'serviceConfig':{'a':1}},"
                "{'clientLanguage':['C'],'serviceConfig':{'a':2}}]",
                NULL, "{'a':2}");
  expect_choice(__LINE__,
                "[{'clientLanguage':['c++'],'serviceConfig':{'a':1}}]", NULL,
                NULL);
  expect_choice(__LINE__, "[{'clientLanguage':[],'serviceConfig':{'a':1}}]",
                NULL, NULL);
  /* clientHostname, exact */
  expect_choice(__LINE__,
                "[{'clientHostname':['Host1'],'serviceConfig':{'a':1}},"
                "{'clientHostname':['h0','host1'],'serviceConfig':{'a':2}},"
                "{'serviceConfig':{'a':3}}]",
                "host1", "{'a':2}");
  expect_choice(__LINE__,
                "[{'clientHostname':['host1'],'serviceConfig':{'a':1}}]", NULL,
                NULL);
  /* percentage 0 never, 100 always */
  expect_choice(__LINE__,
                "[{'percentage':0,'serviceConfig':{'a':1}},"
                "{'percentage':100,'serviceConfig':{'a':2}}]",
                NULL, "{'a':2}");
  expect_choice(__LINE__, "[{'percentage':0,'serviceConfig':{'a':1}}]", NULL,
                NULL);
  /* every present criterion must match */
  expect_choice(__LINE__,
                "[{'clientLanguage':['c'],'clientHostname':['x'],"
                "'serviceConfig':{'a':1}},{'clientLanguage':['c'],"
                "'clientHostname':['h'],'percentage':100,"
                "'serviceConfig':{'a':2}}]",
                "h", "{'a':2}");
  /* nulls count as absent */
  expect_choice(__LINE__,
                "[{'clientLanguage':null,'percentage':null,"
                "'serviceConfig':{'a':1}}]",
                NULL, "{'a':1}");
  /* only the chosen config's validity matters (DNS-04) */
  expect_choice(__LINE__,
                "[{'serviceConfig':{'methodConfig':5}},"
                "{'serviceConfig':{}}]",
                NULL, "{'methodConfig':5}");
}

static void expect_invalid(int line, const char *txt, const char *path,
                           const char *reason) {
  char *out = (char *)1;
  grit_error_detail d;
  grit_err rv = choose(txt, "h", 1, &out, &d);
  if (rv != GRIT_ERR_INVALID_CONFIG || out != NULL ||
      d.code != GRIT_ERR_INVALID_CONFIG || strcmp(d.path, path) != 0 ||
      !strstr(d.reason, reason))
    TEST_FAIL_AT(__FILE__, line, "%s: rv %d, %s: %s; want %s: %s", txt, rv,
                 d.path, d.reason, path, reason);
}

static void test_txt_invalid(void) {
  expect_invalid(__LINE__, "[{'serviceConfig':{}", "$", "invalid JSON");
  expect_invalid(__LINE__, "{'serviceConfig':{}}", "$", "JSON array");
  expect_invalid(__LINE__, "[5]", "$[0]", "must be an object");
  expect_invalid(__LINE__, "[{'serviceConfig':{},'foo':1}]", "$[0].foo",
                 "unknown key");
  /* An unknown key in a later choice invalidates the whole TXT config. */
  expect_invalid(__LINE__,
                 "[{'serviceConfig':{}},{'serviceConfig':{},'clientlanguage':"
                 "['c']}]",
                 "$[1].clientlanguage", "unknown key");
  expect_invalid(__LINE__, "[{'clientLanguage':['c']}]", "$[0].serviceConfig",
                 "is required");
  expect_invalid(__LINE__, "[{'serviceConfig':null}]", "$[0].serviceConfig",
                 "must be an object");
  expect_invalid(__LINE__, "[{'serviceConfig':[]}]", "$[0].serviceConfig",
                 "must be an object");
  expect_invalid(__LINE__, "[{'percentage':101,'serviceConfig':{}}]",
                 "$[0].percentage", "0..100");
  expect_invalid(__LINE__, "[{'percentage':-1,'serviceConfig':{}}]",
                 "$[0].percentage", "0..100");
  expect_invalid(__LINE__, "[{'percentage':50.5,'serviceConfig':{}}]",
                 "$[0].percentage", "0..100");
  expect_invalid(__LINE__, "[{'percentage':'50','serviceConfig':{}}]",
                 "$[0].percentage", "0..100");
  expect_invalid(__LINE__, "[{'clientLanguage':'c','serviceConfig':{}}]",
                 "$[0].clientLanguage", "array of strings");
  expect_invalid(__LINE__, "[{'clientHostname':['h',5],'serviceConfig':{}}]",
                 "$[0].clientHostname[1]", "must be a string");
  expect_invalid(__LINE__, "[{'serviceConfig':{},'serviceConfig':{}}]", "$",
                 "duplicate");
}

/* percentage 50 with a seeded rng: about half, and replayable. */
static void test_txt_percentage_seeded(void) {
  const char *txt = "[{'percentage':50,'serviceConfig':{'a':1}}]";
  int hits = 0;
  grit_rng rng;
  grit_rng_seed(&rng, 42);
  char t[128];
  qinto(t, sizeof(t), (txt));
  char first[64] = {0};
  for (int i = 0; i < 1000; i++) {
    char *out = NULL;
    grit_err rv =
        grit_svccfg_choose_txt(t, strlen(t), NULL, &rng, &out, NULL, NULL);
    if (rv == GRIT_OK)
      hits++;
    else
      ASSERT_EQ(rv, GRIT_ERR_NOT_FOUND);
    if (i < 63)
      first[i] = rv == GRIT_OK ? '1' : '0';
    grit_free(out);
  }
  ASSERT_CMP(hits, >, 420);
  ASSERT_CMP(hits, <, 580);
  /* Same seed, same sequence of decisions. */
  grit_rng_seed(&rng, 42);
  for (int i = 0; i < 63; i++) {
    char *out = NULL;
    grit_err rv =
        grit_svccfg_choose_txt(t, strlen(t), NULL, &rng, &out, NULL, NULL);
    ASSERT_EQ(rv == GRIT_OK ? '1' : '0', first[i]);
    grit_free(out);
  }
  /* A p% choice that misses falls through to the next one. */
  grit_rng_seed(&rng, 7);
  qinto(t, sizeof(t),
        ("[{'percentage':1,'serviceConfig':{'a':1}},"
         "{'serviceConfig':{'a':2}}]"));
  int second = 0;
  for (int i = 0; i < 200; i++) {
    char *out = NULL;
    ASSERT_OK(
        grit_svccfg_choose_txt(t, strlen(t), NULL, &rng, &out, NULL, NULL));
    second += strcmp(out, "{\"a\":2}") == 0;
    grit_free(out);
  }
  ASSERT_CMP(second, >, 180);
}

/* The chosen text parses back to the same config (integers stay integers,
 * reals keep their value). */
static void test_txt_chosen_roundtrip(void) {
  char *out = NULL;
  ASSERT_OK(choose("[{'serviceConfig':{'retryThrottling':{'maxTokens':10,"
                   "'tokenRatio':0.29},'methodConfig':[{'name':[{'service':"
                   "'S'}],'retryPolicy':{'maxAttempts':3,'initialBackoff':"
                   "'0.1s','maxBackoff':'1s','backoffMultiplier':1.3,"
                   "'retryableStatusCodes':['UNAVAILABLE']}}]}}]",
                   NULL, 1, &out, NULL));
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(out, strlen(out), NULL, &d);
  ASSERT_NOT_NULL(cfg);
  ASSERT_EQ(grit_svccfg_get_global(cfg)->token_ratio_milli, 290);
  const grit_method_cfg *m = grit_svccfg_find(cfg, "/S/M");
  ASSERT_EQ(m->retry.max_attempts, 3);
  ASSERT(m->retry.backoff_multiplier == 1.3);
  grit_svccfg_unref(cfg);
  grit_free(out);
}

/* ---- description ---- */

static void test_describe(void) {
  grit_svccfg_opts o = {.max_attempts_cap = 5};
  const char *j =
      q("{'methodConfig':[{'name':[{'service':'pkg.Echo','method':'Get'},"
        "{'service':'pkg.Other'}],'timeout':'1.5s','waitForReady':true,"
        "'maxRequestMessageBytes':1024,'retryPolicy':{'maxAttempts':6,"
        "'initialBackoff':'0.1s','maxBackoff':'1s','backoffMultiplier':2,"
        "'retryableStatusCodes':['unavailable','DEADLINE_EXCEEDED'],"
        "'perAttemptRecvTimeout':'2s'}},"
        "{'name':[{}],'hedgingPolicy':{'maxAttempts':3,'hedgingDelay':'0.5s',"
        "'nonFatalStatusCodes':[14]}}],"
        "'retryThrottling':{'maxTokens':10,'tokenRatio':0.1},"
        "'loadBalancingConfig':[{'pick_first':{'shuffleAddressList':true}}]}");
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), &o, NULL);
  ASSERT_NOT_NULL(cfg);
  char *s = NULL;
  ASSERT_OK(grit_svccfg_describe(cfg, &s));
  static const char *const want[] = {
      "methodConfig[0] applies to: /pkg.Echo/Get, /pkg.Other/* (every method "
      "of pkg.Other)",
      "timeout: 1.5s",
      "wait for ready: yes",
      "largest request message: 1024 bytes",
      "retry: up to 5 attempts, the first included (maxAttempts 6 lowered",
      "backoff: first 0.1s, x2 per retry, at most 1s",
      "retried on: DEADLINE_EXCEEDED, UNAVAILABLE",
      "per-attempt receive timeout: 2s",
      "methodConfig[1] applies to: default",
      "wait for ready: not set",
      "hedging: up to 3 attempts, the first included, a new one every 0.5s",
      "non-fatal codes (send the next hedge at once): UNAVAILABLE",
      "retry throttling: 10 tokens per server name, -1 per failed attempt, "
      "+0.100 per successful call; retries and hedges stop while tokens <= "
      "5.000",
      "load balancing: pick_first, addresses shuffled on every update (from "
      "loadBalancingConfig)",
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    if (!strstr(s, want[i]))
      TEST_FAIL_AT(__FILE__, __LINE__, "missing \"%s\" in:\n%s", want[i], s);
  }
  grit_free(s);
  grit_svccfg_unref(cfg);

  cfg = grit_svccfg_parse("{}", 2, NULL, NULL);
  ASSERT_OK(grit_svccfg_describe(cfg, &s));
  ASSERT(strstr(s, "no method configs") != NULL);
  ASSERT(strstr(s, "retry throttling: off") != NULL);
  ASSERT(strstr(s, "load balancing: pick_first\n") != NULL);
  grit_free(s);
  grit_svccfg_unref(cfg);

  cfg = parse_q("{'loadBalancingPolicy':'ROUND_robin','methodConfig':[{"
                "'name':[{'service':'S'}],'timeout':'1.000000001s',"
                "'hedgingPolicy':{'maxAttempts':2}}]}",
                0, NULL);
  ASSERT_OK(grit_svccfg_describe(cfg, &s));
  ASSERT(strstr(s, "load balancing: round_robin\n") != NULL);
  ASSERT(strstr(s, "timeout: 1.000000001s") != NULL);
  ASSERT(strstr(s, "all sent at once") != NULL);
  ASSERT(strstr(s, "hedge at once): none") != NULL);
  grit_free(s);
  grit_svccfg_unref(cfg);
  ASSERT_EQ(grit_svccfg_describe(NULL, &s), GRIT_ERR_INVALID_ARG);
}

/* ---- public check API ---- */

static void test_public_check(void) {
  char *r = NULL;
  const char *j = q("{'methodConfig':[{'name':[{'service':'S'}],"
                    "'timeout':'1'},{'name':[{'service':'S'}]}],"
                    "'retryThrottling':{'maxTokens':10,'tokenRatio':0.0001}}");
  ASSERT_EQ(grit_service_config_check(j, strlen(j), &r),
            GRIT_ERR_INVALID_CONFIG);
  ASSERT_NOT_NULL(r);
  ASSERT(strstr(r, "3 problems") != NULL);
  ASSERT(strstr(r, "$.methodConfig[0].timeout: ") != NULL);
  ASSERT(strstr(r, "$.methodConfig[1].name[0]: duplicate") != NULL);
  ASSERT(strstr(r, "$.retryThrottling.tokenRatio: must be at least") != NULL);
  grit_free(r);

  j = q(MC("'timeout':'2s'"));
  ASSERT_OK(grit_service_config_check(j, strlen(j), &r));
  ASSERT(strncmp(r, "valid service config\n", 21) == 0);
  ASSERT(strstr(r, "timeout: 2s") != NULL);
  grit_free(r);
  ASSERT_OK(grit_service_config_check(j, strlen(j), NULL));
  ASSERT_EQ(grit_service_config_check("[", 1, &r), GRIT_ERR_INVALID_CONFIG);
  ASSERT(strstr(r, "1 problem)") != NULL);
  ASSERT(strstr(r, "$: invalid JSON") != NULL);
  grit_free(r);
  ASSERT_EQ(grit_service_config_check(NULL, 0, &r), GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(r);
}

/* issue 28: the README's outlier detection example is applied, so the
 * check has no "skipped" warning for it (it had one: the lint knew only
 * pick_first and round_robin); an unknown entry in its childPolicy list
 * is named with its full path. */
static void test_lint_outlier_detection(void) {
  char *r = NULL;
  const char *j =
      q("{'loadBalancingConfig':[{'outlier_detection_experimental':{"
        "'interval':'1s','failurePercentageEjection':{'threshold':50,"
        "'minimumHosts':2,'requestVolume':10},"
        "'childPolicy':[{'round_robin':{}}]}}],"
        "'healthCheckConfig':{'serviceName':'svc'}}");
  ASSERT_OK(grit_service_config_check(j, strlen(j), &r));
  ASSERT_NOT_NULL(r);
  ASSERT_NULL(strstr(r, "warning"));
  ASSERT_NULL(strstr(r, "skipped"));
  ASSERT_NOT_NULL(strstr(r, "outlier detection: every 1s"));
  grit_free(r);

  j = q("{'loadBalancingConfig':[{'grpclb':{}},"
        "{'outlier_detection_experimental':{'childPolicy':"
        "[{'grpclb':{}},{'pick_first':{}}]}},{'round_robin':{}}]}");
  ASSERT_OK(grit_service_config_check(j, strlen(j), &r));
  ASSERT_NOT_NULL(strstr(r, "3 warnings"));
  ASSERT_NOT_NULL(strstr(r, "$.loadBalancingConfig[0]: \"grpclb\" skipped"));
  ASSERT_NOT_NULL(
      strstr(r, "$.loadBalancingConfig[1].outlier_detection_experimental."
                "childPolicy[0]: \"grpclb\" skipped: grit does not know "
                "this policy as a child policy"));
  ASSERT_NOT_NULL(strstr(r, "$.loadBalancingConfig[2]: \"round_robin\" not "
                            "used"));
  ASSERT_NULL(strstr(r, "outlier_detection_experimental\" skipped"));
  grit_free(r);
}

/* issue 28, DNS-10: the retry and hedging policies a dropped config took
 * with it, named per method config name; a name still given the same
 * kind of policy by the config now in force (exact, service or default
 * lookup) is not lost. */
static void test_lost_policies(void) {
  const char *o =
      q("{'methodConfig':["
        "{'name':[{'service':'pkg.Svc','method':'Get'}],'retryPolicy':{"
        "'maxAttempts':3,'initialBackoff':'0.1s','maxBackoff':'1s',"
        "'backoffMultiplier':2,'retryableStatusCodes':['UNAVAILABLE']}},"
        "{'name':[{'service':'pkg.Other'},{'service':'pkg.Kept'}],"
        "'hedgingPolicy':{'maxAttempts':2}},"
        "{'name':[{'service':'pkg.Plain'}],'timeout':'1s'}]}");
  grit_svccfg *old = grit_svccfg_parse(o, strlen(o), NULL, NULL);
  ASSERT_NOT_NULL(old);
  char *lost = NULL;
  ASSERT_OK(grit_svccfg_lost_policies(old, NULL, &lost));
  ASSERT_STR_EQ(lost, "retryPolicy (3 attempts) for /pkg.Svc/Get, "
                      "hedgingPolicy (2 attempts) for /pkg.Other/* (every "
                      "method of pkg.Other), hedgingPolicy (2 attempts) for "
                      "/pkg.Kept/* (every method of pkg.Kept)");
  grit_free(lost);
  /* The default config keeps hedging for every method (so pkg.Other and
   * pkg.Kept keep theirs) and gives pkg.Svc/Get hedging, not retry. */
  const char *n = q("{'methodConfig':[{'name':[{}],"
                    "'hedgingPolicy':{'maxAttempts':4}}]}");
  grit_svccfg *now = grit_svccfg_parse(n, strlen(n), NULL, NULL);
  ASSERT_NOT_NULL(now);
  ASSERT_OK(grit_svccfg_lost_policies(old, now, &lost));
  ASSERT_STR_EQ(lost, "retryPolicy (3 attempts) for /pkg.Svc/Get");
  grit_free(lost);
  /* Nothing lost: NULL. */
  ASSERT_OK(grit_svccfg_lost_policies(old, old, &lost));
  ASSERT_NULL(lost);
  ASSERT_OK(grit_svccfg_lost_policies(now, now, &lost));
  ASSERT_NULL(lost);
  ASSERT_EQ(grit_svccfg_lost_policies(NULL, now, &lost), GRIT_ERR_INVALID_ARG);
  grit_svccfg_unref(now);
  grit_svccfg_unref(old);
}

static void test_public_check_txt(void) {
  char *r = NULL;
  const char *t = q("grpc_config=[{'clientLanguage':['go'],'serviceConfig':"
                    "{}},{'percentage':30,'serviceConfig':{'methodConfig':"
                    "[{'name':[{'service':'S'}],'timeout':'x'}]}},"
                    "{'serviceConfig':{'loadBalancingPolicy':'round_robin'}},"
                    "{'serviceConfig':{}}]");
  ASSERT_EQ(grit_service_config_check_txt(t, strlen(t), "h", &r),
            GRIT_ERR_INVALID_CONFIG);
  ASSERT(strstr(r, "choice [0]: not for this client (clientLanguage") != NULL);
  ASSERT(strstr(r, "choice [1]: chosen by 30%") != NULL);
  ASSERT(strstr(r, "$[1].serviceConfig.methodConfig[0].timeout: ") != NULL);
  ASSERT(strstr(r, "choice [2]: chosen (every client") != NULL);
  ASSERT(strstr(r, "load balancing: round_robin") != NULL);
  ASSERT(strstr(r, "choice [3]: never reached") != NULL);
  grit_free(r);

  t = q("[{'clientHostname':['x'],'serviceConfig':{}},"
        "{'percentage':0,'serviceConfig':{}}]");
  ASSERT_EQ(grit_service_config_check_txt(t, strlen(t), "h", &r),
            GRIT_ERR_NOT_FOUND);
  ASSERT(strstr(r, "clientHostname does not list") != NULL);
  ASSERT(strstr(r, "no config from DNS") != NULL);
  ASSERT(strstr(r, "choice [1]: percentage 0, never chosen") != NULL);
  grit_free(r);

  /* A p% choice may be chosen: it counts as a match, and so does OK. */
  t = q("[{'percentage':10,'serviceConfig':{}}]");
  ASSERT_OK(grit_service_config_check_txt(t, strlen(t), "h", &r));
  grit_free(r);
  /* NULL hostname: the machine's; without clientHostname it still picks. */
  t = q("grpc_config=[{'serviceConfig':{}}]");
  ASSERT_OK(grit_service_config_check_txt(t, strlen(t), NULL, &r));
  ASSERT(strstr(r, "choice [0]: chosen (every") != NULL);
  grit_free(r);
  ASSERT_EQ(grit_service_config_check_txt(NULL, 0, NULL, &r),
            GRIT_ERR_INVALID_ARG);

  t = q("[{'serviceConfig':{},'x':1},{'percentage':200,'serviceConfig':{}}]");
  ASSERT_EQ(grit_service_config_check_txt(t, strlen(t), NULL, &r),
            GRIT_ERR_INVALID_CONFIG);
  ASSERT(strstr(r, "invalid TXT config") != NULL);
  ASSERT(strstr(r, "$[0].x: unknown key") != NULL);
  ASSERT(strstr(r, "$[1].percentage: ") != NULL);
  grit_free(r);
}

/* ---- OOM sweep (STYLE §3.10) ---- */

typedef struct failing {
  long count, fail_at, live;
} failing;

static failing fa;

static void *fa_malloc(size_t n, void *ud) {
  (void)ud;
  if (fa.count++ == fa.fail_at)
    return NULL;
  void *p = malloc(n ? n : 1);
  if (p)
    fa.live++;
  return p;
}

static void fa_free(void *p, void *ud) {
  (void)ud;
  if (p)
    fa.live--;
  free(p);
}

static void *fa_calloc(size_t n, size_t s, void *ud) {
  (void)ud;
  if (fa.count++ == fa.fail_at)
    return NULL;
  void *p = calloc(n ? n : 1, s ? s : 1);
  if (p)
    fa.live++;
  return p;
}

static void *fa_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (fa.count++ == fa.fail_at)
    return NULL;
  void *r = realloc(p, n ? n : 1);
  if (r && !p)
    fa.live++;
  return r;
}

static const grit_allocator fa_alloc = {
    .user_data = NULL,
    .malloc = fa_malloc,
    .free = fa_free,
    .calloc = fa_calloc,
    .realloc = fa_realloc,
};

static const char *rich_config(void) {
  static char buf[2048];
  qinto(buf, sizeof(buf),
        ("{'methodConfig':[{'name':[{'service':'pkg.A','method':'Get'},"
         "{'service':'pkg.A'},{'service':'pkg.B','method':'X'}],"
         "'timeout':'1.5s','retryPolicy':{'maxAttempts':4,"
         "'initialBackoff':'0.1s','maxBackoff':'1s',"
         "'backoffMultiplier':2,'retryableStatusCodes':[14]}},"
         "{'name':[{}],'hedgingPolicy':{'maxAttempts':3}},"
         "{'name':[{'service':'pkg.C'}],'waitForReady':false}],"
         "'retryThrottling':{'maxTokens':10,'tokenRatio':0.1},"
         "'loadBalancingConfig':[{'outlier_detection_experimental':{"
         "'failurePercentageEjection':{},'successRateEjection':{},"
         "'childPolicy':[{'round_robin':{}}]}}],"
         "'healthCheckConfig':{'serviceName':'pkg.A'}}"));
  return buf;
}

typedef grit_err (*oom_fn)(void);

static grit_err oom_parse(void) {
  const char *j = rich_config();
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), NULL, &d);
  if (!cfg) {
    return d.code;
  }
  grit_err rv =
      grit_svccfg_find(cfg, "/pkg.A/Put") ? GRIT_OK : GRIT_ERR_NOT_FOUND;
  grit_svccfg_unref(cfg);
  return rv;
}

static grit_err oom_describe(void) {
  const char *j = rich_config();
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), NULL, &d);
  if (!cfg)
    return d.code;
  char *s = NULL;
  grit_err rv = grit_svccfg_describe(cfg, &s);
  if (rv == GRIT_OK && !s)
    rv = GRIT_ERR_INVALID_ARG;
  grit_free(s);
  grit_svccfg_unref(cfg);
  return rv;
}

static grit_err oom_lost(void) {
  const char *j = rich_config();
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), NULL, &d);
  if (!cfg)
    return d.code;
  char *s = NULL;
  grit_err rv = grit_svccfg_lost_policies(cfg, NULL, &s);
  grit_free(s);
  grit_svccfg_unref(cfg);
  return rv;
}

static grit_err oom_txt(void) {
  const grit_txt_chunk c[] = {
      CHUNK("x", true),
      CHUNK("grpc_config=[{'percentage':100,", true),
      CHUNK("'serviceConfig':{'loadBalancingPolicy':'round_robin'}}]", false),
  };
  char *v = NULL, *chosen = NULL;
  size_t len;
  grit_err rv = grit_svccfg_txt_extract(c, 3, &v, &len);
  if (rv != GRIT_OK)
    return rv;
  for (size_t i = 0; i < len; i++)
    if (v[i] == '\'')
      v[i] = '"';
  grit_rng rng;
  grit_rng_seed(&rng, 3);
  grit_error_detail d;
  rv = grit_svccfg_choose_txt(v, len, "h", &rng, &chosen, NULL, &d);
  grit_free(v);
  if (rv == GRIT_OK) {
    grit_svccfg *cfg = grit_svccfg_parse(chosen, strlen(chosen), NULL, &d);
    rv = cfg ? GRIT_OK : d.code;
    grit_svccfg_unref(cfg);
  }
  grit_free(chosen);
  return rv;
}

static grit_err oom_check(void) {
  char *r = NULL;
  const char *j = rich_config();
  grit_err rv = grit_service_config_check(j, strlen(j), &r);
  grit_free(r);
  if (rv != GRIT_OK)
    return rv;
  j = q("{'methodConfig':[{'name':[{'service':'S'}],'timeout':'1'},"
        "{'name':[{'service':'S'}]}]}");
  rv = grit_service_config_check(j, strlen(j), &r);
  grit_free(r);
  return rv == GRIT_ERR_INVALID_CONFIG ? GRIT_OK : rv;
}

static grit_err oom_check_txt(void) {
  char *r = NULL;
  const char *t = q("[{'clientLanguage':['go'],'serviceConfig':{}},"
                    "{'percentage':30,'serviceConfig':{'methodConfig':5}},"
                    "{'serviceConfig':{'methodConfig':[{'name':[{}],"
                    "'timeout':'1s'}]}}]");
  grit_err rv = grit_service_config_check_txt(t, strlen(t), "h", &r);
  grit_free(r);
  return rv == GRIT_ERR_INVALID_CONFIG ? GRIT_OK : rv;
}

static void sweep(const char *name, oom_fn fn) {
  /* A clean run counts grit's allocations. */
  fa = (failing){.count = 0, .fail_at = -1, .live = 0};
  grit_set_allocator(&fa_alloc);
  grit_err clean = fn();
  long total = fa.count;
  grit_set_allocator(NULL);
  if (clean != GRIT_OK || fa.live != 0)
    TEST_FAIL_AT(__FILE__, __LINE__, "%s: clean run rv %d live %ld", name,
                 clean, fa.live);
  if (total == 0)
    TEST_FAIL_AT(__FILE__, __LINE__, "%s: no allocation to fail", name);
  for (long i = 0; i < total; i++) {
    fa = (failing){.count = 0, .fail_at = i, .live = 0};
    grit_set_allocator(&fa_alloc);
    grit_err rv = fn();
    grit_set_allocator(NULL);
    if ((rv != GRIT_OK && rv != GRIT_ERR_NOMEM) || fa.live != 0)
      TEST_FAIL_AT(__FILE__, __LINE__,
                   "%s: failing allocation %ld of %ld: rv %d, %ld live", name,
                   i, total, rv, fa.live);
  }
  fprintf(stderr, "  %s: %ld allocations swept\n", name, total);
}

/* OD-01 / HC-01: the values parsed, A50's defaults, and the words. */
static void test_outlier_health_values(void) {
  const char *j =
      q("{'loadBalancingConfig':[{'outlier_detection_experimental':{"
        "'interval':'1s','maxEjectionTime':'2.5s','failurePercentageEjection':"
        "{'threshold':50,'minimumHosts':2,'requestVolume':10},"
        "'childPolicy':[{'round_robin':{}}]}}],"
        "'healthCheckConfig':{'serviceName':'pkg.Svc'}}");
  grit_svccfg *cfg = grit_svccfg_parse(j, strlen(j), NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  const grit_svccfg_global *g = grit_svccfg_get_global(cfg);
  ASSERT_EQ(g->has_outlier_detection, true);
  ASSERT_EQ(g->lb, GRIT_LB_ROUND_ROBIN);
  ASSERT_EQ(g->od.interval_ns, 1000000000);
  ASSERT_EQ(g->od.base_ejection_time_ns, 30000000000);
  ASSERT_EQ(g->od.max_ejection_time_ns, 2500000000);
  ASSERT_EQ(g->od.max_ejection_percent, 10);
  ASSERT_EQ(g->od.has_success_rate, false);
  ASSERT_EQ(g->od.has_failure_percentage, true);
  ASSERT_EQ(g->od.fp_threshold, 50);
  ASSERT_EQ(g->od.fp_enforcement_percentage, 100);
  ASSERT_EQ(g->od.fp_minimum_hosts, 2);
  ASSERT_EQ(g->od.fp_request_volume, 10);
  ASSERT_STR_EQ(g->health_check_service, "pkg.Svc");
  char *s = NULL;
  ASSERT_OK(grit_svccfg_describe(cfg, &s));
  ASSERT_NOT_NULL(strstr(s, "outlier detection: every 1s"));
  ASSERT_NOT_NULL(strstr(s, "at most max(30s, 2.5s)"));
  ASSERT_NOT_NULL(strstr(s, "eject one whose failures exceed 50%"));
  ASSERT_NOT_NULL(strstr(s, "service \"pkg.Svc\""));
  grit_free(s);
  grit_svccfg_unref(cfg);

  j = q("{'loadBalancingConfig':[{'outlier_detection_experimental':{"
        "'successRateEjection':{},'childPolicy':[{'pick_first':{}}]}}]}");
  cfg = grit_svccfg_parse(j, strlen(j), NULL, NULL);
  ASSERT_NOT_NULL(cfg);
  g = grit_svccfg_get_global(cfg);
  ASSERT_EQ(g->lb, GRIT_LB_PICK_FIRST);
  ASSERT_NULL(g->health_check_service);
  ASSERT_EQ(g->od.has_success_rate, true);
  ASSERT_EQ(g->od.sr_stdev_factor, 1900);
  ASSERT_EQ(g->od.sr_minimum_hosts, 5);
  ASSERT_EQ(g->od.sr_request_volume, 100);
  ASSERT_EQ(g->od.interval_ns, 10000000000);
  grit_svccfg_unref(cfg);
}

static void test_oom_parse(void) {
  sweep("parse", oom_parse);
}

static void test_oom_describe(void) {
  sweep("describe", oom_describe);
}

static void test_oom_lost(void) {
  sweep("lost", oom_lost);
}

static void test_oom_txt(void) {
  sweep("txt", oom_txt);
}

static void test_oom_check(void) {
  sweep("check", oom_check);
  sweep("check_txt", oom_check_txt);
}

static const test_case tests[] = {
    {"table", test_table},
    {"table_covers_rules", test_table_covers_rules},
    {"collect_all_problems", test_collect_all_problems},
    {"null_detail_ok", test_null_detail_ok},
    {"length_bounded", test_length_bounded},
    {"lookup_order", test_lookup_order},
    {"lookup_none", test_lookup_none},
    {"lookup_many_names", test_lookup_many_names},
    {"ref_unref", test_ref_unref},
    {"full_retry_policy_values", test_full_retry_policy_values},
    {"cap_with_null_opts", test_cap_with_null_opts},
    {"global_of_null", test_global_of_null},
    {"duration_parser", test_duration_parser},
    {"status_code_parser", test_status_code_parser},
    {"txt_extract", test_txt_extract},
    {"txt_choose", test_txt_choose},
    {"txt_invalid", test_txt_invalid},
    {"txt_percentage_seeded", test_txt_percentage_seeded},
    {"txt_chosen_roundtrip", test_txt_chosen_roundtrip},
    {"describe", test_describe},
    {"outlier_health_values", test_outlier_health_values},
    {"public_check", test_public_check},
    {"public_check_txt", test_public_check_txt},
    {"lost_policies", test_lost_policies},
    {"lint_outlier_detection", test_lint_outlier_detection},
    {"oom_parse", test_oom_parse},
    {"oom_describe", test_oom_describe},
    {"oom_lost", test_oom_lost},
    {"oom_txt", test_oom_txt},
    {"oom_check", test_oom_check},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
