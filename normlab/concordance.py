"""Concordance: every section of the five source documents [A]..[E] -> where the course covers it.

``HEADINGS[doc]`` lists each document's own section headings (its numbering, or the heading
text where it has none) in reading order. ``ROWS`` maps each heading (sometimes split into
parts) to a notebook file, that notebook's section title, and a **phrase** that the section's
text must contain (the answer, not only a heading), with the ids of the errata
(``normlab.errata``) found in it. Each row's status is data, written here:

- "covered": the section exists, contains the phrase and has code cells (which the notebook
  run executes), i.e. there is a runnable answer;
- "text": answered in prose only (a map, a reference list, the model answers), phrase present;
- "planned": not written yet.

``tests/test_concordance.py`` checks every status against the notebook sources. Nothing here
reads the notebooks at run time.

    from normlab import concordance
    concordance.table("A")        # one document's concordance as a Table
    concordance.questions_table() # the interview questions of [A] and [D], and where they are answered
"""

from __future__ import annotations

from dataclasses import dataclass

from .viz import Table

__all__ = ["DOCS", "HEADINGS", "ROWS", "QUESTIONS", "MODEL_ANSWERS", "Row", "Question", "STATUSES", "status",
           "rows_of", "table", "questions_table"]

STATUSES = ("covered", "text", "planned")

DOCS = {
    "A": "《Add & Norm》",
    "B": "《BatchNorm / LayerNorm / RMSNorm 笔记》（原标题 \"BayerNorm\"）",
    "C": "《Add & Norm（大模型篇）》",
    "D": "《归一化技术》",
    "E": "《Normalization》",
}

# Each document's own headings, in order (numbered where the document numbers them).
HEADINGS: dict[str, list[str]] = {
    "A": ["引言", "§1 Add", "§2 Norm", "§2.1 Norm的作用", "§2.2 BatchNorm", "§2.2.1 BatchNorm代码实现",
          "§2.3 LayerNorm", "§2.3.1 LayerNorm代码实现", "§2.4 RMSNorm", "§2.5 DeepNorm", "§2.5.1 DeepNorm代码实现",
          "§2.6 Post-norm & Pre-norm", "总结", "参考"],
    "B": ["BayerNorm", "LatchNorm", "RMSNorm"],
    "C": ["引言", "残差连接与层归一化的重要性", "残差连接 (Add)", "残差连接的数学表达", "残差连接的优势",
          "层归一化 (Norm)", "层归一化的数学表达", "层归一化的优势", "Pre-Norm与Post-Norm",
          "残差缩放与初始化 · 1. ReZero", "残差缩放与初始化 · 2. LayerScale", "残差缩放与初始化 · 3. 深度缩放",
          "层归一化的变体 · 1. RMSNorm", "层归一化的变体 · 2. PowerNorm", "层归一化的变体 · 3. ScaleNorm",
          "不同模型中的Add & Norm实现",
          "Add & Norm对模型训练的影响 · 1. 训练稳定性与收敛速度", "Add & Norm对模型训练的影响 · 2. 超深网络的可行性",
          "Add & Norm对模型训练的影响 · 3. 梯度流分析",
          "Add & Norm的高效实现 · 1. 融合操作", "Add & Norm的高效实现 · 2. 低精度优化",
          "Add & Norm的高效实现 · 3. 核心算法原语优化", "小结"],
    "D": ["本节目标", "阅读材料", "知识总结 · 三大归一化技术对比", "数学公式详解 · 1. Batch Normalization",
          "数学公式详解 · 2. Layer Normalization", "数学公式详解 · 3. RMS Normalization", "Pre-Norm vs Post-Norm",
          "面试问题解答 · Q1", "面试问题解答 · Q2", "面试问题解答 · Q3", "面试问题解答 · Q4",
          "代码实现 · 三种Norm的PyTorch实现", "代码实现 · 性能对比 compare_normalization",
          "代码实现 · PostNormBlock / PreNormBlock", "学习检验", "相关链接"],
    "E": ["引言 (ICS)", "§1 Batch Normalization", "§1.1 训练中的 BN", "§1.2 测试中的 BN", "§1.3 BN 的优势",
          "§2 Layer Normalization", "§3 Root Mean Square Normalization", "§4 Deep Normalization",
          "§5 Norm 的位置选择"],
}

# Section titles of the course notebooks (exactly as their headings read).
S01 = {"jac": "2. \"雅可比矩阵里的 +1\"，用数字看", "plain": "1. 没有残差 vs 有残差：逐层测量",
       "ens": "3. 残差网络像浅层网络的集成：删掉一个块", "scale": "4. 残差缩放：初始化时它们各做了什么",
       "bare": "没有 Add、也没有 Norm 的深网络"}
S02 = {"scratch": "1. 从零写 BatchNorm", "mode": "2. 训练模式与推理模式：`model.eval()` 与 `torch.no_grad()`",
       "mom": "3. 滑动统计量：momentum 是谁乘谁？", "lr": "4.1 BN 让网络容忍大得多的学习率",
       "small": "4.2 batch 小了 BN 就坏，GroupNorm 不受影响", "diag": "4.4 Karpathy 式诊断：激活、梯度、更新量",
       "ics": "6. BN 为什么有效？\"内部协变量偏移\"之争"}
S03 = {"scratch": "1. 从零写 LayerNorm", "axes": "2. 谁和谁共用一组统计量？",
       "pad": "3. 变长序列与填充：BN 的统计量随填充漂移，LN 不会", "inv": "4. 不变性：量出来，而不是背下来",
       "eps": "5.2 ε 放在根号里面还是外面？", "bert": "5.3 BERT 的 ε = 1e-12 在半精度下"}
S04 = {"scratch": "1. 从零写 RMSNorm", "inv": "2. 不变性表：逐项测量", "real": "3. 真实模型里的写法",
       "fp16": "4. 精度：float16 必须先转 float32", "speed": "5. RMSNorm 真的更快吗？"}
S05 = {"const": "1. α 与 β：逐个架构", "wrong": "2. 两种常见的错误写法",
       "deep": "3. 小规模复现：深层 Post-LN 训练不动，DeepNorm 可以", "all": "4. 放在一起看：DeepNorm、Admin 与残差缩放",
       "grad": "3.2 初始化时每一层的梯度", "q8": "5. [A] Q8：DeepNorm 的优点，在 1000 层上看"}
S06 = {"wirings": "1. 五种接法，一个参数", "xiong": "2. Xiong et al. 2020：理论说了什么，我们复现出什么",
       "warm": "3. 学习率预热：一个几秒钟的实验", "width": "4. \"Pre-Norm 增加的是宽度而不是深度\"——测一测",
       "models": "5. 各大模型用的是哪一种"}
S07 = {"scale": "1. ScaleNorm：只有一个增益的 RMSNorm", "power": "2. PowerNorm：论文里的和资料里的不是一个东西"}
S08 = {"answers": "资料中面试题的参考答案", "ln": "① LayerNorm", "rms": "② RMSNorm", "bn": "③ BatchNorm（含滑动统计量）",
       "block": "⑦ Pre-Norm 与 Post-Norm 块", "deep": "⑧ DeepNorm：α、β 与残差更新"}
S09 = {"index": "1. 勘误索引", "claims": "3. 程度性说法：在哪里测量", "conc": "4. 章节对照",
       "refs": "6. 资料的参考文献"}
S00 = {"order": "课程顺序"}


@dataclass(frozen=True)
class Row:
    doc: str                # "A".."E"
    heading: str            # one of HEADINGS[doc]
    part: str               # what in that section (our words); "" for the whole section
    notebook: str           # notebook file stem, e.g. "02_batchnorm"
    section: str            # that notebook's section title
    phrase: str             # text that the section must contain (checked by the tests)
    errata: tuple[str, ...] = ()
    status: str = "covered"


# Sections answered in prose only (no code cells): the course map, the model answers, the references.
_TEXT_SECTIONS = {("00_course_map", "课程顺序"), ("08_drills", "资料中面试题的参考答案"),
                  ("09_companion", "6. 资料的参考文献"), ("05_deepnorm", "4. 放在一起看：DeepNorm、Admin 与残差缩放")}


def _r(doc, heading, part, notebook, section, phrase, *errata) -> Row:
    status = "text" if (notebook, section) in _TEXT_SECTIONS else "covered"
    return Row(doc, heading, part, notebook, section, phrase, tuple(errata), status)


ROWS: list[Row] = [
    # [A]
    _r("A", "引言", "Add & Norm 在 Transformer 里的位置", "00_course_map", S00["order"], "01 残差连接 (Add)"),
    _r("A", "§1 Add", "残差 F(x)+x 与\"导数为 1\"", "01_residuals", S01["jac"], "**A1**", "A1"),
    _r("A", "§2 Norm", "BN 与 LN 的公式", "03_layernorm", S03["axes"], "均值和方差"),
    _r("A", "§2.1 Norm的作用", "稳定分布、允许更大学习率", "02_batchnorm", S02["lr"], "学习率"),
    _r("A", "§2.1 Norm的作用", "\"保证特征分布稳定\"（ICS 之争）", "02_batchnorm", S02["ics"], "Santurkar"),
    _r("A", "§2.2 BatchNorm", "同一通道跨样本可比、跨通道不可比", "03_layernorm", S03["axes"], "BatchNorm"),
    _r("A", "§2.2.1 BatchNorm代码实现", "手写 BN", "02_batchnorm", S02["scratch"], "Ioffe & Szegedy 2015", "A2"),
    _r("A", "§2.3 LayerNorm", "句内可比：为什么序列用 LN", "03_layernorm", S03["pad"], "填充"),
    _r("A", "§2.3.1 LayerNorm代码实现", "手写 LN 与 ε 位置", "03_layernorm", S03["eps"], "**A3**", "A3"),
    _r("A", "§2.4 RMSNorm", "去掉均值（\"式 (1)\" 应为式 (2)）；代码与用法", "04_rmsnorm", S04["scratch"], "减均值", "A4", "A7"),
    _r("A", "§2.5 DeepNorm", "LN(α·x + Sublayer(x))，α 由层数决定", "05_deepnorm", S05["const"], "(2N)^{1/4}"),
    _r("A", "§2.5 DeepNorm", "\"LN 的改进版、保持梯度量级恒定\"", "05_deepnorm", S05["deep"], "‖ΔF‖", "A8"),
    _r("A", "§2.5.1 DeepNorm代码实现", "α、β 放在哪里", "05_deepnorm", S05["wrong"], "LN(x + α·G(x))", "A5"),
    _r("A", "§2.6 Post-norm & Pre-norm", "Xiong et al. 的对比、Pre-LN 的来历", "06_placement", S06["xiong"], "**A6**", "A6"),
    _r("A", "§2.6 Post-norm & Pre-norm", "Pre-Norm 无需预热、收敛更快", "06_placement", S06["warm"], "预热"),
    _r("A", "§2.6 Post-norm & Pre-norm", "\"增加宽度而非深度\"", "06_placement", S06["width"], "kexue.fm/archives/9009"),
    _r("A", "总结", "十个面试题的参考答案", "08_drills", S08["answers"], "十个问题"),
    _r("A", "参考", "参考文献", "09_companion", S09["refs"], "arXiv 1512.03385"),
    # [B]
    _r("B", "BayerNorm", "BN 在 MLP/CNN 中的归一化维度", "03_layernorm", S03["axes"], "BatchNorm"),
    _r("B", "BayerNorm", "手写 BN：模式判断、滑动统计量", "02_batchnorm", S02["mode"], "is_grad_enabled", "B1"),
    _r("B", "BayerNorm", "momentum = 0.9 的约定", "02_batchnorm", S02["mom"], "momentum"),
    _r("B", "LatchNorm", "LN 的思路（每个 token 的特征）", "03_layernorm", S03["scratch"], "Ba et al. 2016"),
    _r("B", "LatchNorm", "Pre Norm 与 Post Norm 的放置", "06_placement", S06["wirings"], "Post-LN"),
    _r("B", "LatchNorm", "\"Pre Norm 增加宽度、效果不如 Post Norm\"", "06_placement", S06["width"], "宽度"),
    _r("B", "LatchNorm", "BERT 用 Post、GPT 时代用 Pre", "06_placement", S06["models"], "BERT"),
    _r("B", "RMSNorm", "思路：去掉均值（和\"拉伸\"？）", "04_rmsnorm", S04["scratch"], "**B2**", "B2"),
    _r("B", "RMSNorm", "LlamaRMSNorm 代码", "04_rmsnorm", S04["real"], "LlamaRMSNorm"),
    # [C]
    _r("C", "引言", "Add & Norm 是什么", "00_course_map", S00["order"], "01 残差连接 (Add)"),
    _r("C", "残差连接与层归一化的重要性", "\"没有它无法突破 10 层\"", "01_residuals", S01["bare"], "10 层"),
    _r("C", "残差连接 (Add)", "残差函数与 Post-Norm 块", "01_residuals", S01["plain"], "残差堆叠"),
    _r("C", "残差连接的数学表达", "y = x + F(x)（原文公式缺失）", "01_residuals", S01["jac"], "F(x)+x"),
    _r("C", "残差连接的优势", "梯度通路、恒等映射、集成", "01_residuals", S01["ens"], "Veit et al. 2016"),
    _r("C", "层归一化 (Norm)", "手写 LN（ε = 1e-12）", "03_layernorm", S03["bert"], "**C9**", "C9"),
    _r("C", "层归一化的数学表达", "LN 公式（原文公式缺失）", "03_layernorm", S03["scratch"], "Ba et al. 2016"),
    _r("C", "层归一化的优势", "ICS、batch 无关、梯度缩放", "03_layernorm", S03["inv"], "不变"),
    _r("C", "Pre-Norm与Post-Norm", "两种接法与对比表", "06_placement", S06["wirings"], "Post-LN"),
    _r("C", "残差缩放与初始化 · 1. ReZero", "零初始化的门", "01_residuals", S01["scale"], "ReZero", "C2"),
    _r("C", "残差缩放与初始化 · 2. LayerScale", "逐通道缩放与出处", "01_residuals", S01["scale"], "LayerScale", "C1"),
    _r("C", "残差缩放与初始化 · 3. 深度缩放", "1/√(2N) 与 DeepNet 的区别", "05_deepnorm", S05["all"], "**C3**", "C3"),
    _r("C", "层归一化的变体 · 1. RMSNorm", "RMSNorm 代码", "04_rmsnorm", S04["scratch"], "RMS"),
    _r("C", "层归一化的变体 · 2. PowerNorm", "PowerNorm 是什么", "07_beyond", S07["power"], "Shen et al. 2020", "C4"),
    _r("C", "层归一化的变体 · 3. ScaleNorm", "ScaleNorm g·x/‖x‖", "07_beyond", S07["scale"], "Nguyen & Salazar 2019"),
    _r("C", "不同模型中的Add & Norm实现", "各模型的 norm、位置与特殊设计", "06_placement", S06["models"], "T5", "C5"),
    _r("C", "Add & Norm对模型训练的影响 · 1. 训练稳定性与收敛速度", "监测 LN 的输入输出统计量", "06_placement",
       S06["wirings"], "**C6**", "C6"),
    _r("C", "Add & Norm对模型训练的影响 · 2. 超深网络的可行性", "100 层网络靠什么稳定", "05_deepnorm", S05["deep"], "Post-LN"),
    _r("C", "Add & Norm对模型训练的影响 · 3. 梯度流分析", "逐层梯度大小", "06_placement", S06["wirings"], "**C7**", "C7"),
    _r("C", "Add & Norm的高效实现 · 1. 融合操作", "\"融合\" Add & Norm", "04_rmsnorm", S04["speed"], "**C8**", "C8"),
    _r("C", "Add & Norm的高效实现 · 2. 低精度优化", "半精度下的 LayerNorm", "03_layernorm", S03["bert"], "float16"),
    _r("C", "Add & Norm的高效实现 · 3. 核心算法原语优化", "内核层面的开销", "04_rmsnorm", S04["speed"], "内存"),
    _r("C", "小结", "四点总结", "06_placement", S06["models"], "Llama"),
    # [D]
    _r("D", "本节目标", "三种 norm 与 Pre/Post-Norm", "00_course_map", S00["order"], "RMSNorm"),
    _r("D", "阅读材料", "知乎与科学空间文章", "09_companion", S09["refs"], "kexue.fm"),
    _r("D", "知识总结 · 三大归一化技术对比", "归一化维度与适用场景", "03_layernorm", S03["axes"], "LayerNorm"),
    _r("D", "知识总结 · 三大归一化技术对比", "计算成本一栏：推理时 BN 可折叠，训练时不行", "09_companion", S09["claims"],
       "errata.bn_cost"),
    _r("D", "数学公式详解 · 1. Batch Normalization", "BN 公式、训练/推理差异、小 batch", "02_batchnorm", S02["small"],
       "GroupNorm"),
    _r("D", "数学公式详解 · 2. Layer Normalization", "LN 公式", "03_layernorm", S03["scratch"], "Ba et al. 2016"),
    _r("D", "数学公式详解 · 3. RMS Normalization", "RMSNorm 公式", "04_rmsnorm", S04["scratch"], "RMS"),
    _r("D", "Pre-Norm vs Post-Norm", "两种流程与特点", "06_placement", S06["wirings"], "**D5**", "D5"),
    _r("D", "面试问题解答 · Q1", "BN 与 LN 的区别", "03_layernorm", S03["axes"], "BatchNorm", "D1"),
    _r("D", "面试问题解答 · Q2", "为什么用 RMSNorm；技术原理代码里的 x.var()", "04_rmsnorm", S04["speed"], "RMSNorm", "D1"),
    _r("D", "面试问题解答 · Q3", "Pre/Post-Norm 的位置与训练差异", "06_placement", S06["warm"], "Pre-LN"),
    _r("D", "面试问题解答 · Q4", "Pre-Norm 为什么更稳定", "06_placement", S06["xiong"], "定理 1", "D3"),
    _r("D", "代码实现 · 三种Norm的PyTorch实现", "手写 BN / LN / RMSNorm", "02_batchnorm", S02["mom"], "**D2**", "D2"),
    _r("D", "代码实现 · 性能对比 compare_normalization", "计时方式：无预热、无重复，BN 建了不计时", "09_companion",
       S09["claims"], "errata.timing_pitfalls"),
    _r("D", "代码实现 · PostNormBlock / PreNormBlock", "两种块", "08_drills", S08["block"], "Post-Norm"),
    _r("D", "学习检验", "自查清单", "08_drills", S08["answers"], "[D]"),
    _r("D", "相关链接", "链接", "09_companion", S09["refs"], "kexue.fm"),
    # [E]
    _r("E", "引言 (ICS)", "内部协变量偏移", "02_batchnorm", S02["ics"], "internal covariate shift"),
    _r("E", "§1 Batch Normalization", "图像与文本上 BN 的归一化范围", "03_layernorm", S03["axes"], "(B, E)", "E1"),
    _r("E", "§1.1 训练中的 BN", "训练时的公式", "02_batchnorm", S02["scratch"], "Algorithm 1"),
    _r("E", "§1.2 测试中的 BN", "无偏估计、滑动平均与推理公式", "02_batchnorm", S02["mom"], "momentum", "E3", "E4", "E9"),
    _r("E", "§1.3 BN 的优势", "优势与参考代码", "02_batchnorm", S02["mode"], "**B1**", "B1", "E4"),
    _r("E", "§1.3 BN 的优势", "避免饱和区", "02_batchnorm", S02["diag"], "饱和"),
    _r("E", "§2 Layer Normalization", "填充问题、归一化范围、公式", "03_layernorm", S03["pad"], "[E] §2", "E2", "E5"),
    _r("E", "§3 Root Mean Square Normalization", "公式与代码、7%–64%", "04_rmsnorm", S04["real"], "根号", "E6"),
    _r("E", "§4 Deep Normalization", "残差改写与 α、β", "05_deepnorm", S05["wrong"], "**E7**", "E7", "E8"),
    _r("E", "§5 Norm 的位置选择", "（原文此节为空）", "06_placement", S06["wirings"], "Pre-LN"),
]

@dataclass(frozen=True)
class Question:
    doc: str                # "A" or "D"
    number: str             # "1".."10", "Q1".."Q4"
    question: str           # the question, short, our words
    notebook: str
    section: str
    phrase: str             # text that the section must contain (checked by the tests)
    status: str = "covered"


# Interview questions: [A]'s ten (总结) and [D]'s four (面试问题解答), where the course answers them.
QUESTIONS: list[Question] = [
    Question("A", "1", "残差连接的作用", "01_residuals", S01["jac"], "雅可比矩阵"),
    Question("A", "2", "Norm 的作用", "02_batchnorm", S02["lr"], "学习率"),
    Question("A", "3", "LN 和 BN 的区别", "03_layernorm", S03["axes"], "BatchNorm"),
    Question("A", "4", "手写 LN 和 BN", "08_drills", S08["ln"], "有偏"),
    Question("A", "5", "手写 RMSNorm", "08_drills", S08["rms"], "均方根"),
    Question("A", "6", "RMSNorm 相比 LayerNorm 的特点", "04_rmsnorm", S04["inv"], "不变"),
    Question("A", "7", "手写 DeepNorm", "08_drills", S08["deep"], "β"),
    Question("A", "8", "DeepNorm 的优点", "05_deepnorm", S05["q8"], "1000"),
    Question("A", "9", "LN 在 LLM 中不同位置的区别", "06_placement", S06["xiong"], "定理 1"),
    Question("A", "10", "各 LLM 用的哪种 LN", "06_placement", S06["models"], "Llama"),
    Question("D", "Q1", "BatchNorm 和 LayerNorm 的区别", "03_layernorm", S03["axes"], "LayerNorm"),
    Question("D", "Q2", "为什么现在用 RMSNorm", "04_rmsnorm", S04["speed"], "RMSNorm"),
    Question("D", "Q3", "Pre-Norm 和 Post-Norm 的位置区别", "08_drills", S08["block"], "Pre-Norm"),
    Question("D", "Q4", "为什么 Pre-Norm 训练更稳定", "06_placement", S06["xiong"], "Pre-LN"),
]
MODEL_ANSWERS = ("08_drills", S08["answers"])


_BY_SECTION = {(r.notebook, r.section): r.status for r in ROWS}
_BY_SECTION.update({(q.notebook, q.section): q.status for q in QUESTIONS})
_BY_SECTION[MODEL_ANSWERS] = "text"


def status(notebook: str, section: str) -> str:
    """The recorded status of a course section named by the concordance ("covered", "text" or
    "planned"); a section the concordance does not name is "planned". Data, checked by the tests."""
    return _BY_SECTION.get((notebook, section), "planned")


_LABEL = {"covered": "✓ 可运行", "text": "✓ 文字", "planned": "… 计划中"}


def rows_of(doc: str) -> list[Row]:
    if doc not in DOCS:
        raise ValueError(f"doc 应为 {'/'.join(DOCS)} 之一 (expected a document letter)，实际收到 {doc!r}。")
    return [r for r in ROWS if r.doc == doc]


def table(doc: str) -> Table:
    """One document's concordance: its section, the part, the course notebook + section, status, errata."""
    rows = [[f"[{r.doc}] {r.heading}", r.part, r.notebook, r.section, _LABEL[r.status], ", ".join(r.errata) or "—"]
            for r in rows_of(doc)]
    return Table(rows, ["资料章节", "内容", "notebook", "课程小节", "状态", "勘误"],
                 title=f"[{doc}] {DOCS[doc]}：章节对照")


def questions_table() -> Table:
    """The interview questions of [A] and [D], where the course answers them (model answers in 08)."""
    rows = [[f"[{q.doc}] {q.number}", q.question, q.notebook, q.section, _LABEL[q.status]] for q in QUESTIONS]
    return Table(rows, ["题号", "问题", "notebook", "课程小节", "状态"],
                 title=f"资料中的面试题 → 课程中的回答（参考答案：{MODEL_ANSWERS[0]} · {MODEL_ANSWERS[1]}）")
